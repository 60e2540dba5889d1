# A local cluster, run by `qleet server` (kubesim): the quickest way to a runtime.
resource "qleet_kubernetes_runtime" "dev" {
  name          = "dev"
  provider_type = "local"
  region        = "local"
  nodes         = 3
  labels = {
    env = "dev"
  }
}

# An existing cluster, reached by kubeconfig. The kubeconfig must embed its certificates and
# credentials (no file paths, no exec plugins); it is sensitive and write-only in the API.
resource "qleet_kubernetes_runtime" "byo" {
  name          = "byo"
  provider_type = "kubeconfig"
  kubeconfig    = file("${path.module}/cluster.kubeconfig")
  context       = "admin@byo"
  region        = "eu-west"

  # Apply returns once the control plane has connected and found Ready nodes; a cluster that cannot be
  # reached fails the apply at once with the reason.
  timeouts = {
    create = "5m"
  }
}
