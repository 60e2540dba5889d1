package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// placementConfig is the quickstart's shape: a profile, and an app placed in two regions with no runtime
// declared.
func placementConfig(name, placementExtra, instanceExtra string) string {
	return fmt.Sprintf(`
resource "qleet_runtime_profile" "default" {
  name          = "%[1]s"
  provider_type = "local"
  regions       = ["%[1]s-eu", "%[1]s-us"]
  nodes         = 1
  labels        = { suite = %[1]q }
}

resource "qleet_workload_definition" "web" {
  name       = "%[1]s-def"
  containers = [{ name = "web", image = "nginx:1.27" }]
  replicas   = 2
}

resource "qleet_workload_instance" "web" {
  name          = %[1]q
  definition_id = qleet_workload_definition.web.id
  placement = {
    regions = ["%[1]s-eu", "%[1]s-us"]
    %[2]s
  }
  # The placement provisions runtimes from the profile: keep it until the instance is gone.
  depends_on = [qleet_runtime_profile.default]
  %[3]s
}
`, name, placementExtra, instanceExtra)
}

func TestAccRuntimeProfileAndPlacement(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-pl")
	addr := "qleet_workload_instance.web"
	ctx := context.Background()
	// The runtimes the placement provisioned, by region.
	provisioned := func(region string) (*api.KubernetesRuntime, error) {
		return env.api.KubernetesRuntimes().GetByName(ctx, name+"-"+region)
	}
	replicasIn := func(region string, want int32) resource.TestCheckFunc {
		return func(*terraform.State) error {
			rt, err := provisioned(name + "-" + region)
			if err != nil {
				return err
			}
			if rt.Labels[api.LabelProfile] != name {
				return fmt.Errorf("runtime %s labels = %v, want the profile", rt.Name, rt.Labels)
			}
			inst, err := env.api.WorkloadInstances().GetByName(ctx, name)
			if err != nil {
				return err
			}
			for _, p := range inst.Status.Placements {
				if p.RuntimeID == rt.ID {
					if p.Replicas != want || p.ReadyReplicas != want || p.Phase != api.PhaseReady {
						return fmt.Errorf("placement in %s: %+v, want %d Ready replicas", region, p, want)
					}
					return nil
				}
			}
			return fmt.Errorf("no placement on runtime %s: %+v", rt.Name, inst.Status.Placements)
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: resource.ComposeTestCheckFunc(env.checkDestroyed, func(*terraform.State) error {
			// The runtimes outlive the instance (they belong to the profile, and are garbage-collected
			// after the owner grace); remove them here to free the machine for the other tests.
			for _, region := range []string{"eu", "us"} {
				rt, err := provisioned(name + "-" + region)
				if api.IsNotFound(err) {
					continue
				}
				if err != nil {
					return err
				}
				if len(rt.Owners) != 1 || rt.Owners[0].Kind != api.KindRuntimeProfile {
					return fmt.Errorf("runtime %s owners = %v, want its profile", rt.Name, rt.Owners)
				}
				if err := env.api.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{Wait: true}); err != nil && !api.IsNotFound(err) {
					return err
				}
			}
			return nil
		}),
		Steps: []resource.TestStep{
			{
				// Overlapping profiles of equal priority are refused, naming the other one.
				Config: placementConfig(name, "", "") + fmt.Sprintf(`
resource "qleet_runtime_profile" "twin" {
  name          = "%[1]s-twin"
  provider_type = "local"
  regions       = ["%[1]s-us"]
  depends_on    = [qleet_runtime_profile.default]
}
`, name),
				ExpectError: regexp.MustCompile(`(?s)spec.priority.*runtime_profile\s+"` + name + `"\s+also\s+serves\s+region`),
			},
			{
				Config: placementConfig(name, "", ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
					resource.TestCheckResourceAttr(addr, "status.placements.#", "2"),
					resource.TestCheckResourceAttr(addr, "status.placements.0.region", name+"-eu"),
					resource.TestCheckResourceAttr(addr, "status.placements.0.runtime", name+"-"+name+"-eu"),
					resource.TestCheckResourceAttr(addr, "status.placements.0.profile", name),
					resource.TestCheckResourceAttr(addr, "status.placements.1.region", name+"-us"),
					resource.TestCheckResourceAttr(addr, "status.ready_replicas", "4"),
					resource.TestCheckNoResourceAttr(addr, "runtime_id"),
					resource.TestCheckResourceAttr("qleet_runtime_profile.default", "nodes", "1"),
					replicasIn("eu", 2), replicasIn("us", 2),
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				// Weighted replicas: 4 split 3 to 1.
				Config: placementConfig(name, `replicas_mode = "weighted"
    weights       = { "`+name+`-eu" = 3, "`+name+`-us" = 1 }
    failover_toleration_seconds = 30`, "replicas = 4"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
					resource.TestCheckResourceAttr(addr, "placement.replicas_mode", "weighted"),
					resource.TestCheckResourceAttr(addr, "placement.weights."+name+"-eu", "3"),
					resource.TestCheckResourceAttr(addr, "placement.failover_toleration_seconds", "30"),
					resource.TestCheckResourceAttr(addr, "status.placements.0.replicas", "3"),
					resource.TestCheckResourceAttr(addr, "status.placements.1.replicas", "1"),
					replicasIn("eu", 3), replicasIn("us", 1),
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				ResourceName:      "qleet_runtime_profile.default",
				ImportState:       true,
				ImportStateVerify: true,
				// The count of its runtimes is refreshed on resync: the state may hold an older one.
				ImportStateVerifyIgnore: []string{"status.runtimes"},
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
				// Live pod counts: a pod of the scaled-down region may still be terminating (and Ready)
				// when the state was written.
				ImportStateVerifyIgnore: []string{"status.ready_replicas", "status.available_replicas",
					"status.placements.0.ready_replicas", "status.placements.1.ready_replicas"},
			},
		},
	})
}
