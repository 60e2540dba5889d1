# Gateways with hosts under example.com get DNS records; with provider none they are listed in status.
resource "qleet_domain_name" "example" {
  name = "example"
  zone = "example.com"
}

output "records" {
  value = qleet_domain_name.example.status.records
}
