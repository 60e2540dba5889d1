# Local (kubesim) clusters provisioned on demand in two regions: 2 nodes that grow to 5 while pods
# cannot be scheduled, and removed after an hour with nothing placed on them.
resource "qleet_runtime_profile" "default" {
  name          = "default"
  provider_type = "local"
  regions       = ["eu-west", "us-east"]
  nodes         = 2
  min_nodes     = 2
  max_nodes     = 5
  reclaim_after = "1h"
}

# A second profile for the same region wins for placements that select its labels; it needs another
# priority, since a placement without a selector could use either.
resource "qleet_runtime_profile" "large" {
  name           = "large"
  provider_type  = "local"
  regions        = ["eu-west"]
  nodes          = 6
  runtime_labels = { size = "large" }
  priority       = 10
}

# An app placed in both regions: a cluster is provisioned from "default" in each region with none.
resource "qleet_workload_instance" "web" {
  name          = "web"
  definition_id = qleet_workload_definition.web.id
  placement = {
    regions       = ["eu-west", "us-east"]
    replicas_mode = "weighted"
    weights       = { eu-west = 3, us-east = 1 }
  }
  depends_on = [qleet_runtime_profile.default]
}
