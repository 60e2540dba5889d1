# Look a secret up by name: its keys and the instances it serves, never its values.
data "qleet_secret" "api" {
  name = "api"
}

output "keys" {
  value = data.qleet_secret.api.status.keys
}
