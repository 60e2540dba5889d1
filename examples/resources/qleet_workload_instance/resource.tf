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

# Or place it by region instead of pinning a runtime: one copy per region on a Ready runtime there, or
# on one provisioned from a qleet_runtime_profile; replicas move off a runtime unreachable for 2 minutes.
resource "qleet_workload_instance" "web_global" {
  name          = "web-global"
  definition_id = qleet_workload_definition.web.id
  placement = {
    regions                     = ["eu-west", "us-east"]
    runtime_selector            = { tier = "prod" }
    failover_toleration_seconds = 120
  }
}

# An app that uses an RPC node: the node is rolled out first, and the app gets RPC_HOST, RPC_PORT and
# RPC_URL pointing at its Service.
resource "qleet_workload_instance" "app" {
  name          = "app"
  definition_id = qleet_workload_definition.app.id
  runtime_id    = qleet_kubernetes_runtime.dev.id
  uses = [{
    instance_id = qleet_workload_instance.rpc.id
    env_prefix  = "RPC"
  }]
}
