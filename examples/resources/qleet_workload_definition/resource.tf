# Containers: one Deployment, with a Service for the declared ports, autoscaled on CPU.
resource "qleet_workload_definition" "web" {
  name = "web"
  containers = [{
    name  = "web"
    image = "nginx:1.27"
    ports = [{ name = "http", container_port = 80 }]
    env = {
      LOG_LEVEL = "info"
    }
    resources = {
      requests = { cpu = "100m", memory = "64Mi" }
      limits   = { memory = "128Mi" }
    }
    readiness_probe = {
      http_get_path = "/"
      port          = 80
    }
  }]
  replicas = 2
  autoscaling = {
    min_replicas       = 2
    max_replicas       = 10
    target_cpu_percent = 70
  }
}

# Raw Kubernetes manifests.
resource "qleet_workload_definition" "config" {
  name      = "config"
  manifests = <<-YAML
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: settings
    data:
      greeting: hello
  YAML
}

# A Helm chart.
resource "qleet_workload_definition" "redis" {
  name = "redis"
  helm = {
    repository = "https://charts.bitnami.com/bitnami"
    chart      = "redis"
    version    = "19.6.0"
    values     = yamlencode({ architecture = "standalone" })
  }
}
