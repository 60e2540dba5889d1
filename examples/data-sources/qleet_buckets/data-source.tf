# Every bucket labelled env=prod.
data "qleet_buckets" "prod" {
  label_selector = "env=prod"
}

output "names" {
  value = [for o in data.qleet_buckets.prod.items : o.name]
}
