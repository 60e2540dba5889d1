# Look a support service up by name.
data "qleet_support_service" "this" {
  name = "web"
}

output "phase" {
  value = data.qleet_support_service.this.status.phase
}
