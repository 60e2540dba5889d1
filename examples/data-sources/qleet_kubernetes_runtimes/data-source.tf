# Every kubernetes runtime labelled env=prod.
data "qleet_kubernetes_runtimes" "prod" {
  label_selector = "env=prod"
}

output "names" {
  value = [for o in data.qleet_kubernetes_runtimes.prod.items : o.name]
}
