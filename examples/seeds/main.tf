# The seeds' shape: an app in two regions, on clusters provisioned from a profile, with the RPC node it
# needs, one database and a secret. The app declares the node with placement = "with_consumers", so
# QleetOS installs the node wherever the app runs, before the app. The database has one home (the app's
# first region, eu-west): the app in us-east is given that same database, not a second one. The app gets
# RPC_HOST, RPC_PORT, RPC_URL, DATABASE_URL (and the parts) and API_TOKEN as environment variables. No
# password or secret value passes through the API or lands in the state, except the token you write here.
#
# From the repository root, with no dev_overrides (docs/guides/local-development.md explains each step):
#
#   make build kubesim install-provider   # bin/qleet, bin/kubesim; the provider into ~/.terraform.d/plugins
#   bin/qleet server --support-chart-dir charts/support &   # the control plane in one process; data in .qleet
#   until curl -fs http://127.0.0.1:8080/readyz >/dev/null; do sleep 1; done
#   export QLEET_ENDPOINT=http://127.0.0.1:8080 QLEET_TOKEN=$(cat .qleet/admin.token)
#   cd examples/seeds && terraform init && terraform apply -var api_token=...

terraform {
  required_providers {
    qleet = {
      source = "qleetos/qleet"
    }
  }
}

provider "qleet" {}

variable "api_token" {
  type      = string
  sensitive = true
}

resource "qleet_runtime_profile" "default" {
  name          = "seeds"
  provider_type = "local"
  regions       = ["eu-west", "us-east"]
  nodes         = 2
}

resource "qleet_workload_definition" "rpc" {
  name = "rpc"
  containers = [{
    name  = "node"
    image = "ethereum/client-go:v1.14.12"
    ports = [{ name = "rpc", container_port = 8545 }]
  }]
}

# No runtime_id or placement: the node runs where the instances that use it with
# placement = "with_consumers" run, and leaves a cluster when the last of them does.
resource "qleet_workload_instance" "rpc" {
  name          = "rpc"
  definition_id = qleet_workload_definition.rpc.id
}

# One database, at home in the app's first region; set region (or runtime_id) to choose another.
# `qleet describe database seeds` shows its home and the access it gives the other region.
resource "qleet_database" "main" {
  name   = "seeds"
  retain = true
}

resource "qleet_workload_definition" "app" {
  name = "app"
  containers = [{
    name  = "web"
    image = "nginx:1.27"
    ports = [{ name = "http", container_port = 80 }]
  }]
}

resource "qleet_workload_instance" "app" {
  name          = "app"
  definition_id = qleet_workload_definition.app.id
  placement     = { regions = ["eu-west", "us-east"] }
  uses          = [{ instance_id = qleet_workload_instance.rpc.id, env_prefix = "RPC", placement = "with_consumers" }]
  databases     = [qleet_database.main.id]
  depends_on    = [qleet_runtime_profile.default]
}

resource "qleet_secret" "api" {
  name         = "api"
  instance_ids = [qleet_workload_instance.app.id]
  values       = { API_TOKEN = var.api_token }
}

resource "qleet_gateway" "app" {
  name        = "app"
  instance_id = qleet_workload_instance.app.id
  hosts       = ["app.seeds.test"]
}

output "url" {
  value = qleet_gateway.app.status.url
}
