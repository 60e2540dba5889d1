# Look a cloud account up by name: the AWS account id and the identity QleetOS acts as, never its secrets.
data "qleet_cloud_account" "prod" {
  name = "prod"
}

output "account_id" {
  value = data.qleet_cloud_account.prod.status.account_id
}
