# metrics-server on a runtime, declared by the operator: it stays whether or not anything uses it.
resource "qleet_support_service" "metrics" {
  name       = "metrics-prod"
  runtime_id = qleet_kubernetes_runtime.prod.id
  type       = "metrics-server"
}

# ingress-nginx from a mirror of the upstream chart repository, with extra values.
resource "qleet_support_service" "ingress" {
  name       = "ingress-prod"
  runtime_id = qleet_kubernetes_runtime.prod.id
  type       = "ingress"
  repository = "https://charts.mirror.internal/ingress-nginx"
  values = yamlencode({
    controller = {
      ingressClassResource = { name = "qleet" }
      service              = { labels = { "qleetos.io/ingress-controller" = "true" } }
      replicaCount         = 2
    }
  })
}
