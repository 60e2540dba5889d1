# Look a workload instance up by name...
data "qleet_workload_instance" "by_name" {
  name = "web"
}

# ...or by ID.
data "qleet_workload_instance" "by_id" {
  id = "0190a3f2-4b7e-7c1a-9d2e-1f2a3b4c5d6e"
}

output "phase" {
  value = data.qleet_workload_instance.by_name.status.phase
}
