# Every secret labelled team=payments.
data "qleet_secrets" "payments" {
  label_selector = "team=payments"
}

output "names" {
  value = [for o in data.qleet_secrets.payments.items : o.name]
}
