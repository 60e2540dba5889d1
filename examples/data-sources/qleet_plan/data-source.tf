# Preview what a change would make QleetOS do, without making it: here a definition and an instance of it
# placed in two regions. The plan lists the runtimes provisioned from a runtime profile (and where), the
# support services installed, the dependencies created and the instances rolled, each with its reason.
data "qleet_plan" "hello" {
  changes = [
    {
      op   = "create"
      kind = "workload_definition"
      id   = "def" # a placeholder that the instance below references
      name = "hello"
      spec_json = jsonencode({
        containers = [{ name = "web", image = "nginx:1.27", ports = [{ container_port = 80 }] }]
      })
    },
    {
      op   = "create"
      kind = "workload_instance"
      name = "hello"
      spec_json = jsonencode({
        definition_id = "def"
        placement     = { regions = ["eu-west", "us-east"] }
      })
    },
  ]
}

# e.g. will provision kubernetes_runtime "default-eu-west" in eu-west from runtime_profile "default"
output "implied" {
  value = data.qleet_plan.hello.summary
}

output "actions" {
  value = [for a in data.qleet_plan.hello.actions : a.description]
}
