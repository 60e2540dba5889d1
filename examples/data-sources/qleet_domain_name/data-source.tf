# Look a domain name up by name.
data "qleet_domain_name" "this" {
  name = "web"
}

output "phase" {
  value = data.qleet_domain_name.this.status.phase
}
