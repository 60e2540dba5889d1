# HTTPS for the "web" instance on every runtime it runs on: an ingress controller and cert-manager are
# installed where missing, the host is routed to the instance's Service, and a certificate is issued.
resource "qleet_gateway" "web" {
  name        = "web"
  instance_id = qleet_workload_instance.web.id
  hosts       = ["app.example.com"]
  paths       = ["/"]
}

# Plain HTTP on any host, for an internal API on port 8080.
resource "qleet_gateway" "api" {
  name        = "api"
  instance_id = qleet_workload_instance.api.id
  paths       = ["/api"]
  port        = 8080
}

output "url" {
  value = qleet_gateway.web.status.url
}
