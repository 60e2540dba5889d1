# The seeds' shape: an RPC node, an app that uses it, a database and a secret, on a cluster provisioned
# from a profile. The node and the database are Ready before the app rolls out; the app gets RPC_HOST,
# RPC_PORT, RPC_URL, DATABASE_URL (and the parts) and API_TOKEN as environment variables. No password
# or secret value passes through the API or lands in the state, except the token you write here.
#
#   qleet server --support-chart-dir charts/support &
#   export QLEET_ENDPOINT=http://127.0.0.1:8080 QLEET_TOKEN=$(cat .qleet/admin.token)
#   terraform init && terraform apply -var api_token=...

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
  regions       = ["eu-west"]
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

resource "qleet_workload_instance" "rpc" {
  name          = "rpc"
  definition_id = qleet_workload_definition.rpc.id
  placement     = { regions = ["eu-west"] }
  depends_on    = [qleet_runtime_profile.default]
}

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
  placement     = { regions = ["eu-west"] }
  uses          = [{ instance_id = qleet_workload_instance.rpc.id, env_prefix = "RPC" }]
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
