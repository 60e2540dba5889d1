terraform {
  required_providers {
    qleet = {
      source = "qleetos/qleet"
    }
  }
}

# Configure the provider with attributes...
provider "qleet" {
  endpoint = "http://127.0.0.1:8080"
  token    = var.qleet_token # a developer or admin token
}

# ...or leave them out and set QLEET_ENDPOINT, QLEET_TOKEN (and QLEET_CA_CERT for an https endpoint
# with a private CA) in the environment:
#
#   provider "qleet" {}

variable "qleet_token" {
  type      = string
  sensitive = true
}
