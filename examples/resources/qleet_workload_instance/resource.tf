# Run the "web" definition on the "dev" runtime, with overrides.
resource "qleet_workload_instance" "web_dev" {
  name          = "web-dev"
  definition_id = qleet_workload_definition.web.id
  runtime_id    = qleet_kubernetes_runtime.dev.id
  namespace     = "web"
  replicas      = 1
  env = {
    LOG_LEVEL = "debug"
  }
  images = {
    web = "nginx:1.27-alpine"
  }
}

output "web_dev_ready_replicas" {
  value = qleet_workload_instance.web_dev.status.ready_replicas
}
