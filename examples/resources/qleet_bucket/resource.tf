# An S3-compatible bucket for the app, which gets S3_ENDPOINT, S3_BUCKET, S3_REGION, S3_ACCESS_KEY_ID and
# S3_SECRET_ACCESS_KEY.
resource "qleet_bucket" "uploads" {
  name = "uploads"
  size = "10Gi"
}

resource "qleet_workload_instance" "app" {
  name          = "app"
  definition_id = qleet_workload_definition.app.id
  runtime_id    = qleet_kubernetes_runtime.dev.id
  buckets       = [qleet_bucket.uploads.id]
}
