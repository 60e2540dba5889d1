# Every runtime profile labelled team=platform.
data "qleet_runtime_profiles" "platform" {
  label_selector = "team=platform"
}

output "names" {
  value = [for o in data.qleet_runtime_profiles.platform.items : o.name]
}
