# Look a bucket up by name: where it runs, never its credentials.
data "qleet_bucket" "this" {
  name = "main"
}

output "hosts" {
  value = [for r in data.qleet_bucket.this.status.runtimes : r.host]
}
