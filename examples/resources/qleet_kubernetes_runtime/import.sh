# Import a runtime by its ID...
terraform import qleet_kubernetes_runtime.dev 0190a3f2-4b7e-7c1a-9d2e-1f2a3b4c5d6e

# ...or by its name, written name:<name> or just <name> (anything that is not a UUID is taken as a name).
terraform import qleet_kubernetes_runtime.dev name:dev
terraform import qleet_kubernetes_runtime.dev dev

# The kubeconfig of a kubeconfig runtime is write-only: unless the token is an admin token, it is not
# imported, and the first apply after the import writes it from the configuration again.
