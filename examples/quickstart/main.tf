# QleetOS quickstart: a local Kubernetes runtime, a workload definition and an instance of it.
#
#   qleet server &                                   # the control plane, in one process
#   export QLEET_ENDPOINT=http://127.0.0.1:8080
#   export QLEET_TOKEN=$(cat .qleet/admin.token)
#   terraform init && terraform apply
#
# Apply returns once every object is reconciled: the cluster is up with Ready nodes, and the
# workload is rolled out with its pods Ready.

terraform {
  required_providers {
    qleet = {
      source = "qleetos/qleet"
    }
  }
}

# Configured from QLEET_ENDPOINT and QLEET_TOKEN.
provider "qleet" {}

# A local cluster (kubesim), run by the control plane.
resource "qleet_kubernetes_runtime" "local" {
  name          = "quickstart"
  provider_type = "local"
  region        = "local"
  nodes         = 2
  labels = {
    app = "quickstart"
  }
}

# What to run: one nginx container, autoscaled between 1 and 3 replicas on CPU.
resource "qleet_workload_definition" "hello" {
  name = "hello"
  containers = [{
    name  = "web"
    image = "nginx:1.27"
    ports = [{ name = "http", container_port = 80 }]
    resources = {
      requests = { cpu = "50m", memory = "32Mi" }
      limits   = { memory = "64Mi" }
    }
    readiness_probe = {
      http_get_path = "/"
      port          = 80
    }
  }]
  autoscaling = {
    min_replicas       = 1
    max_replicas       = 3
    target_cpu_percent = 75
  }
  labels = {
    app = "quickstart"
  }
}

# Where to run it.
resource "qleet_workload_instance" "hello" {
  name          = "hello"
  definition_id = qleet_workload_definition.hello.id
  runtime_id    = qleet_kubernetes_runtime.local.id
  env = {
    GREETING = "hello from QleetOS"
  }
  labels = {
    app = "quickstart"
  }
}

output "cluster_endpoint" {
  value = qleet_kubernetes_runtime.local.status.endpoint
}

output "namespace" {
  value = qleet_workload_instance.hello.status.namespace
}

output "ready_replicas" {
  value = qleet_workload_instance.hello.status.ready_replicas
}
