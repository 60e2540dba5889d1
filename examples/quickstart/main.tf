# QleetOS quickstart: a runtime profile, a workload definition, an instance of it placed in two
# regions, with no cluster declared anywhere, and a gateway with TLS in front of it.
#
# From the repository root, with no dev_overrides (docs/guides/local-development.md explains each step):
#
#   make build kubesim install-provider   # bin/qleet, bin/kubesim; the provider into ~/.terraform.d/plugins
#   bin/qleet server --support-chart-dir charts/support &   # the control plane in one process; data in .qleet
#   until curl -fs http://127.0.0.1:8080/readyz >/dev/null; do sleep 1; done
#   export QLEET_ENDPOINT=http://127.0.0.1:8080 QLEET_TOKEN=$(cat .qleet/admin.token)
#   cd examples/quickstart && terraform init && terraform apply
#
# Apply returns once every object is reconciled: both clusters are up with Ready nodes, the
# workload is rolled out in each with its pods Ready, and each routes the host with a certificate
# (--support-chart-dir installs ingress and cert-manager from the repository's charts, offline).
# After another `make install-provider`, run `terraform init -upgrade` here to pick up the new build.

terraform {
  required_providers {
    qleet = {
      source = "qleetos/qleet"
    }
  }
}

# Configured from QLEET_ENDPOINT and QLEET_TOKEN.
provider "qleet" {}

# How clusters are provisioned on demand: local (kubesim) clusters of 2 nodes that grow to 4 when pods
# do not fit, in either region. There is no runtime resource: the placement below asks for clusters.
resource "qleet_runtime_profile" "default" {
  name          = "default"
  provider_type = "local"
  regions       = ["eu-west", "us-east"]
  nodes         = 2
  min_nodes     = 2
  max_nodes     = 4
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

# Where to run it: in two regions. With no cluster there yet, QleetOS provisions one per region from the
# profile, waits for it, then deploys; apply returns once the app runs in both.
resource "qleet_workload_instance" "hello" {
  name          = "hello"
  definition_id = qleet_workload_definition.hello.id
  placement = {
    regions = ["eu-west", "us-east"]
  }
  # The profile provisions the clusters the placement needs: keep it until the instance is gone. This
  # also has terraform plan the profile first, so that the instance's plan warns with the clusters the
  # profile will provision for it.
  depends_on = [qleet_runtime_profile.default]
  env = {
    GREETING = "hello from QleetOS"
  }
  labels = {
    app = "quickstart"
  }
}

# Ingress with TLS on both clusters: QleetOS installs an ingress controller and cert-manager on each
# (they go again once no gateway needs them), routes the host to the app and has a certificate issued.
resource "qleet_gateway" "hello" {
  name        = "hello"
  instance_id = qleet_workload_instance.hello.id
  hosts       = ["hello.example.test"]
}

output "url" {
  value = qleet_gateway.hello.status.url
}

output "gateway_addresses" {
  value = { for r in qleet_gateway.hello.status.runtimes : r.runtime => r.address }
}

output "placements" {
  value = { for p in qleet_workload_instance.hello.status.placements : p.region => "${p.runtime}: ${p.ready_replicas}/${p.replicas} ready" }
}

output "namespace" {
  value = qleet_workload_instance.hello.status.namespace
}

output "ready_replicas" {
  value = qleet_workload_instance.hello.status.ready_replicas
}
