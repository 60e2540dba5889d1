# Every support service labelled env=prod.
data "qleet_support_services" "prod" {
  label_selector = "env=prod"
}

output "names" {
  value = [for o in data.qleet_support_services.prod.items : o.name]
}
