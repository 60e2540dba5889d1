# Every database labelled env=prod.
data "qleet_databases" "prod" {
  label_selector = "env=prod"
}

output "names" {
  value = [for o in data.qleet_databases.prod.items : o.name]
}
