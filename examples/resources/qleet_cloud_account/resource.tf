# An AWS account reached with QleetOS's own role: the control plane's credentials (its environment or
# instance role) assume it, with the external id its trust policy asks for.
resource "qleet_cloud_account" "prod" {
  name          = "prod"
  provider_type = "aws"
  region        = "us-east-1"
  role_arn      = "arn:aws:iam::123456789012:role/qleetos"
  external_id   = "qleetos-prod"
}

# An account reached with access keys. The secret comes from a variable marked sensitive; the API never
# returns it.
variable "aws_secret_access_key" {
  type      = string
  sensitive = true
}

resource "qleet_cloud_account" "dev" {
  name              = "dev"
  provider_type     = "aws"
  region            = "eu-west-1"
  access_key_id     = "AKIAIOSFODNN7EXAMPLE"
  secret_access_key = var.aws_secret_access_key
}

# EKS clusters provisioned on demand with the account, for apps placed in us-east-1.
resource "qleet_runtime_profile" "eks" {
  name             = "eks"
  provider_type    = "eks"
  regions          = ["us-east-1"]
  cloud_account_id = qleet_cloud_account.prod.id
  node_type        = "t3.large"
  min_nodes        = 2
  max_nodes        = 6
}

# Or one EKS cluster declared outright, in existing subnets.
resource "qleet_kubernetes_runtime" "prod_us" {
  name             = "prod-us"
  provider_type    = "eks"
  region           = "us-east-1"
  cloud_account_id = qleet_cloud_account.prod.id
  subnet_ids       = ["subnet-0a1b2c3d4e5f60718", "subnet-0b2c3d4e5f6071829"]
  min_nodes        = 2
  max_nodes        = 10
}
