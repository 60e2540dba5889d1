# Every cloud account labelled env=prod.
data "qleet_cloud_accounts" "prod" {
  label_selector = "env=prod"
}

output "names" {
  value = [for o in data.qleet_cloud_accounts.prod.items : o.name]
}
