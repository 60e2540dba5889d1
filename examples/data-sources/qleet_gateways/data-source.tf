# Every gateway labelled env=prod.
data "qleet_gateways" "prod" {
  label_selector = "env=prod"
}

output "names" {
  value = [for o in data.qleet_gateways.prod.items : o.name]
}
