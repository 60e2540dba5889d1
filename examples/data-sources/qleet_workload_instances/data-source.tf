# Every workload instance labelled env=prod.
data "qleet_workload_instances" "prod" {
  label_selector = "env=prod"
}

output "names" {
  value = [for o in data.qleet_workload_instances.prod.items : o.name]
}
