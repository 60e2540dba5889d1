# Every workload definition labelled env=prod.
data "qleet_workload_definitions" "prod" {
  label_selector = "env=prod"
}

output "names" {
  value = [for o in data.qleet_workload_definitions.prod.items : o.name]
}
