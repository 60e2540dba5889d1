# QleetOS on AWS: a cloud account, a runtime profile that provisions EKS clusters in us-east-1, and an
# app placed there with a database (RDS) and a bucket (S3). `make demo-aws` applies it against a local
# AWS stand-in whose EKS clusters are kubesim clusters; against real AWS, leave endpoint unset and see
# the AWS guide (docs/guides/aws.md) for the IAM policy. Against real AWS, from the repository root,
# with no dev_overrides (docs/guides/local-development.md explains each step):
#
#   make build install-provider   # bin/qleet; the provider into ~/.terraform.d/plugins
#   bin/qleet server &            # the control plane in one process; data in .qleet
#   until curl -fs http://127.0.0.1:8080/readyz >/dev/null; do sleep 1; done
#   export QLEET_ENDPOINT=http://127.0.0.1:8080 QLEET_TOKEN=$(cat .qleet/admin.token)
#   cd examples/aws && terraform init && terraform apply -var aws_access_key_id=... -var aws_secret_access_key=...

terraform {
  required_providers {
    qleet = {
      source = "qleetos/qleet"
    }
  }
}

# Configured from QLEET_ENDPOINT and QLEET_TOKEN.
provider "qleet" {}

variable "aws_access_key_id" {
  type        = string
  description = "The access key id QleetOS uses."
}

variable "aws_secret_access_key" {
  type        = string
  sensitive   = true
  description = "The secret of the access key: write-only in QleetOS, kept only in this state."
}

variable "aws_endpoint" {
  type        = string
  default     = null
  description = "An endpoint for every AWS service (the local stand-in); null for real AWS."
}

resource "qleet_cloud_account" "aws" {
  name              = "aws"
  provider_type     = "aws"
  region            = "us-east-1"
  access_key_id     = var.aws_access_key_id
  secret_access_key = var.aws_secret_access_key
  endpoint          = var.aws_endpoint
}

# EKS clusters on demand: 2 nodes of t3.medium, growing to 4.
resource "qleet_runtime_profile" "eks" {
  name             = "eks"
  provider_type    = "eks"
  regions          = ["us-east-1"]
  cloud_account_id = qleet_cloud_account.aws.id
  nodes            = 2
  min_nodes        = 2
  max_nodes        = 4
}

resource "qleet_workload_definition" "shop" {
  name       = "shop"
  containers = [{ name = "web", image = "nginx:1.27", ports = [{ container_port = 80 }] }]
}

# On an eks runtime a database is an RDS instance in the cluster's VPC, and a bucket an S3 bucket; the app
# gets DATABASE_URL, S3_BUCKET and the rest as anywhere else.
resource "qleet_database" "orders" {
  name = "orders"
}

resource "qleet_bucket" "media" {
  name = "media"
}

resource "qleet_workload_instance" "shop" {
  name          = "shop"
  definition_id = qleet_workload_definition.shop.id
  placement     = { regions = ["us-east-1"] }
  databases     = [qleet_database.orders.id]
  buckets       = [qleet_bucket.media.id]
  depends_on    = [qleet_runtime_profile.eks]
}

output "account_id" {
  value = qleet_cloud_account.aws.status.account_id
}
