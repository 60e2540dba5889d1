# Every domain name labelled env=prod.
data "qleet_domain_names" "prod" {
  label_selector = "env=prod"
}

output "names" {
  value = [for o in data.qleet_domain_names.prod.items : o.name]
}
