# Look a runtime profile up by name, e.g. to see how many runtimes it provisioned.
data "qleet_runtime_profile" "default" {
  name = "default"
}

output "runtimes" {
  value = data.qleet_runtime_profile.default.status.runtimes
}
