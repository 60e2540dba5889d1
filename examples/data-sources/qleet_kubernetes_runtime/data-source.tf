# Look a kubernetes runtime up by name...
data "qleet_kubernetes_runtime" "by_name" {
  name = "dev"
}

# ...or by ID.
data "qleet_kubernetes_runtime" "by_id" {
  id = "0190a3f2-4b7e-7c1a-9d2e-1f2a3b4c5d6e"
}

output "phase" {
  value = data.qleet_kubernetes_runtime.by_name.status.phase
}
