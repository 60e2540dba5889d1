# An API token for the app, as the environment variable API_TOKEN. The value comes from a variable
# marked sensitive; the API never returns it, and the pods roll when it changes.
variable "api_token" {
  type      = string
  sensitive = true
}

resource "qleet_secret" "api" {
  name         = "api"
  instance_ids = [qleet_workload_instance.app.id]
  values = {
    API_TOKEN = var.api_token
  }
}

# A TLS client certificate, as files under /etc/client-tls.
resource "qleet_secret" "client_tls" {
  name         = "client-tls"
  instance_ids = [qleet_workload_instance.app.id]
  mount_path   = "/etc/client-tls"
  values = {
    tls_crt = file("client.crt")
    tls_key = file("client.key")
  }
}
