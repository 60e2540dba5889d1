# Look a gateway up by name.
data "qleet_gateway" "this" {
  name = "web"
}

output "phase" {
  value = data.qleet_gateway.this.status.phase
}
