package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func definitionConfig(name, image string) string {
	return fmt.Sprintf(`
resource "qleet_workload_definition" "test" {
  name   = %q
  labels = { suite = "acc" }
  containers = [{
    name  = "web"
    image = %q
    ports = [{ name = "http", container_port = 80 }]
    env   = { MODE = "test" }
    resources = {
      requests = { cpu = "50m", memory = "32Mi" }
      limits   = { memory = "64Mi" }
    }
    readiness_probe = { http_get_path = "/", port = 80 }
  }]
  autoscaling = {
    min_replicas = 1
    max_replicas = 3
  }
}
`, name, image)
}

func TestAccWorkloadDefinition(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-def")
	addr := "qleet_workload_definition.test"
	ctx := context.Background()
	apiImage := func(want string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			def, err := env.api.WorkloadDefinitions().GetByName(ctx, name)
			if err != nil {
				return err
			}
			if got := def.Spec.Containers[0].Image; got != want {
				return fmt.Errorf("API image = %q, want %q", got, want)
			}
			return nil
		}
	}

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             env.checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: definitionConfig(name, "nginx:1.27"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrSet(addr, "id"),
					resource.TestCheckResourceAttr(addr, "containers.0.image", "nginx:1.27"),
					resource.TestCheckResourceAttr(addr, "containers.0.ports.0.container_port", "80"),
					resource.TestCheckNoResourceAttr(addr, "containers.0.ports.0.protocol"),
					resource.TestCheckNoResourceAttr(addr, "manifests"),
					// Server defaults, computed.
					resource.TestCheckResourceAttr(addr, "replicas", "1"),
					resource.TestCheckResourceAttr(addr, "autoscaling.target_cpu_percent", "80"),
					resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
					apiImage("nginx:1.27"),
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				Config: definitionConfig(name, "nginx:1.28"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "containers.0.image", "nginx:1.28"),
					resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
					apiImage("nginx:1.28"),
				),
			},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true, ImportStateId: "name:" + name},
			{
				// Drift: an image changed through the API shows as a diff, and apply puts it back.
				PreConfig: func() {
					def, err := env.api.WorkloadDefinitions().GetByName(ctx, name)
					if err != nil {
						t.Fatalf("get definition: %v", err)
					}
					def.Spec.Containers[0].Image = "nginx:drifted"
					if _, err := env.api.WorkloadDefinitions().Update(ctx, def); err != nil {
						t.Fatalf("update definition: %v", err)
					}
				},
				Config: definitionConfig(name, "nginx:1.28"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: apiImage("nginx:1.28"),
			},
		},
	})
}

// Rules known without the server fail at plan time, on the attribute.
func TestAccWorkloadDefinition_planTimeValidation(t *testing.T) {
	testAccEnv(t)
	cases := map[string]struct{ body, want string }{
		"exactly one source": {
			`manifests = "apiVersion: v1"` + "\n" + `containers = [{ name = "a", image = "nginx" }]`,
			`Exactly one of these attributes must be configured`,
		},
		"at least one source": {`replicas = 1`, `Exactly one of these attributes must be configured`},
		"replicas are not negative": {
			`containers = [{ name = "a", image = "nginx" }]` + "\n" + `replicas = -1`, `value must be at least 0`,
		},
		"autoscaling min does not exceed max": {
			`containers = [{ name = "a", image = "nginx" }]` + "\n" + `autoscaling = { min_replicas = 4, max_replicas = 2 }`,
			`min_replicas must not exceed max_replicas \(4 > 2\)`,
		},
		"images are references":      {`containers = [{ name = "a", image = "nginx 1.27" }]`, `is not a valid image reference|must not contain whitespace`},
		"container names are labels": {`containers = [{ name = "A_b", image = "nginx" }]`, `is not a DNS-1123 label`},
		"probes have one action": {
			`containers = [{ name = "a", image = "nginx", liveness_probe = { tcp = true, http_get_path = "/", port = 80 } }]`,
			`exactly one of http_get_path, tcp or exec must be set \(2 are\)`,
		},
		"ports are in range": {`containers = [{ name = "a", image = "nginx", ports = [{ container_port = 70000 }] }]`, `value must be between 1 and 65535`},
	}
	var steps []resource.TestStep
	for _, name := range sortedNames(cases) {
		tc := cases[name]
		steps = append(steps, resource.TestStep{
			Config:      fmt.Sprintf("resource \"qleet_workload_definition\" \"bad\" {\n  name = \"bad\"\n  %s\n}\n", tc.body),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(strings.ReplaceAll(tc.want, " ", `\s+`)), // terraform wraps long lines
		})
	}
	resource.ParallelTest(t, resource.TestCase{ProtoV6ProviderFactories: testProviders, Steps: steps})
}

// Removing an Optional+Computed attribute from the configuration plans it back to the API's default,
// instead of silently keeping the old value.
func TestAccWorkloadDefinition_removedAttributeGoesBackToTheDefault(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-default")
	addr := "qleet_workload_definition.d"
	config := func(extra string) string {
		return fmt.Sprintf(`
resource "qleet_workload_definition" "d" {
  name       = %q
  containers = [{ name = "web", image = "nginx:1.27" }]
  %s
}
`, name, extra)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             env.checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: config("replicas = 3\n  autoscaling = { min_replicas = 1, max_replicas = 4, target_cpu_percent = 50 }"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "replicas", "3"),
					resource.TestCheckResourceAttr(addr, "autoscaling.target_cpu_percent", "50"),
				),
			},
			{
				Config: config("autoscaling = { min_replicas = 1, max_replicas = 4 }"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(addr, tfjsonpath.New("replicas"), knownvalue.Int64Exact(1)),
						plancheck.ExpectKnownValue(addr, tfjsonpath.New("autoscaling").AtMapKey("target_cpu_percent"), knownvalue.Int64Exact(80)),
					},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "replicas", "1"),
					resource.TestCheckResourceAttr(addr, "autoscaling.target_cpu_percent", "80"),
					func(*terraform.State) error {
						d, err := env.api.WorkloadDefinitions().GetByName(context.Background(), name)
						if err != nil {
							return err
						}
						if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Autoscaling.TargetCPUPercent != 80 {
							return fmt.Errorf("API spec: replicas %v, autoscaling %+v", d.Spec.Replicas, d.Spec.Autoscaling)
						}
						return nil
					},
				),
			},
		},
	})
}
