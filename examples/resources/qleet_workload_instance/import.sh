# Import a workload instance by its ID...
terraform import qleet_workload_instance.web_dev 0190a3f2-4b7e-7c1a-9d2e-1f2a3b4c5d6e

# ...or by its name, written name:<name> or just <name>.
terraform import qleet_workload_instance.web_dev name:web-dev
