# Look a database up by name: where it runs, never its credentials.
data "qleet_database" "this" {
  name = "main"
}

output "hosts" {
  value = [for r in data.qleet_database.this.status.runtimes : r.host]
}
