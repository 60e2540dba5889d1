# A PostgreSQL database for the app, kept (volume and credentials) if the database is deleted. The app
# lists it, so Terraform creates it first and the app's first rollout gets DATABASE_URL and the parts.
resource "qleet_database" "main" {
  name    = "main"
  engine  = "postgres"
  version = "16"
  size    = "5Gi"
  retain  = true
}

resource "qleet_workload_instance" "app" {
  name          = "app"
  definition_id = qleet_workload_definition.app.id
  runtime_id    = qleet_kubernetes_runtime.dev.id
  databases     = [qleet_database.main.id]
}
