package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/qleetos/terraform-provider-qleet/client"
)

func runtimeConfig(name, kubeconfigPath, labels string) string {
	return fmt.Sprintf(`
resource "qleet_kubernetes_runtime" "test" {
  name          = %q
  provider_type = "kubeconfig"
  kubeconfig    = file(%s)
  region        = "local"
  labels        = %s
}
`, name, hclString(kubeconfigPath), labels)
}

func TestAccKubernetesRuntime(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-rt")
	addr := "qleet_kubernetes_runtime.test"
	ctx := context.Background()

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             env.checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: runtimeConfig(name, env.kubeconfig, `{ suite = "acc" }`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrSet(addr, "id"),
					resource.TestCheckResourceAttr(addr, "name", name),
					resource.TestCheckResourceAttr(addr, "labels.suite", "acc"),
					resource.TestCheckNoResourceAttr(addr, "nodes"),
					resource.TestCheckResourceAttr(addr, "wait_for_ready", "true"),
					resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
					resource.TestCheckResourceAttr(addr, "status.nodes_ready", "2"),
					resource.TestMatchResourceAttr(addr, "status.version", regexp.MustCompile(`^v\d`)),
					resource.TestMatchResourceAttr(addr, "status.endpoint", regexp.MustCompile(`^https://127\.0\.0\.1:`)),
					resource.TestCheckResourceAttrSet(addr, "created_at"),
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				// Update in place: labels and context (the kubeconfig's current context, named explicitly).
				Config: runtimeConfig(name, env.kubeconfig, `{ suite = "acc", tier = "updated" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "labels.tier", "updated"),
					func(s *terraform.State) error {
						rt, err := env.api.KubernetesRuntimes().GetByName(ctx, name)
						if err != nil {
							return err
						}
						if rt.Labels["tier"] != "updated" {
							return fmt.Errorf("API labels = %v", rt.Labels)
						}
						return nil
					},
				),
			},
			// The kubeconfig is write-only: no token but the controller's reads it back, so an import cannot
			// recover it.
			{
				ResourceName:            addr,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"kubeconfig"},
			},
			{
				ResourceName:            addr,
				ImportState:             true,
				ImportStateId:           "name:" + name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"kubeconfig"},
			},
			{
				ResourceName:            addr,
				ImportState:             true,
				ImportStateId:           name, // a bare name: anything that is not a UUID
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"kubeconfig"},
			},
			{
				// Drift: labels changed through the API outside Terraform show as a diff, and apply puts them back.
				PreConfig: func() {
					rt, err := env.api.KubernetesRuntimes().GetByName(ctx, name)
					if err != nil {
						t.Fatalf("get runtime: %v", err)
					}
					if _, err := env.api.KubernetesRuntimes().Patch(ctx, rt.ID, map[string]any{"labels": map[string]any{"tier": "drifted", "extra": "x"}}); err != nil {
						t.Fatalf("patch runtime: %v", err)
					}
				},
				Config: runtimeConfig(name, env.kubeconfig, `{ suite = "acc", tier = "updated" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: func(s *terraform.State) error {
					rt, err := env.api.KubernetesRuntimes().GetByName(ctx, name)
					if err != nil {
						return err
					}
					if len(rt.Labels) != 2 || rt.Labels["tier"] != "updated" {
						return fmt.Errorf("drift not repaired: API labels = %v", rt.Labels)
					}
					return nil
				},
			},
		},
	})
}

// A runtime whose cluster cannot be reached is retried, not Failed (the cluster may come up): apply ends
// at its timeout with the reason and when it began, and the object stays in the state tainted, so that
// the next apply replaces it.
func TestAccKubernetesRuntime_unreachable(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-dead")
	addr := "qleet_kubernetes_runtime.test"
	dead := env.deadKubeconfig(t)
	withTimeout := "{}\n  timeouts = { create = \"6s\" }"
	unreachable := regexp.MustCompile(`(?s)Kubernetes runtime "` + name + `" was not reconciled within 6s.*127\.0\.0\.1:1.*unreachable since`)

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             env.checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config:      runtimeConfig(name, dead, withTimeout),
				ExpectError: unreachable,
			},
			{
				// Tainted: the plan replaces it.
				Config: runtimeConfig(name, dead, withTimeout),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace)},
				},
				ExpectError: unreachable,
			},
			{
				// Pointed at a live cluster, the replacement succeeds.
				Config:           runtimeConfig(name, env.kubeconfig, "{}"),
				Check:            resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
		},
	})
}

// An object deleted outside Terraform is removed from the state with a warning, and planned again.
func TestAccKubernetesRuntime_deletedOutsideTerraform(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-gone")
	addr := "qleet_kubernetes_runtime.test"
	ctx := context.Background()
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             env.checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config:           runtimeConfig(name, env.kubeconfig, "{}"),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				PreConfig: func() {
					rt, err := env.api.KubernetesRuntimes().GetByName(ctx, name)
					if err != nil {
						t.Fatalf("get runtime: %v", err)
					}
					if err := env.api.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{Wait: true}); err != nil {
						t.Fatalf("delete runtime: %v", err)
					}
				},
				Config:             runtimeConfig(name, env.kubeconfig, "{}"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: runtimeConfig(name, env.kubeconfig, "{}"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
		},
	})
}

// Rules known without the server fail at plan time, on the attribute.
func TestAccKubernetesRuntime_planTimeValidation(t *testing.T) {
	testAccEnv(t)
	cases := map[string]struct{ body, want string }{
		"provider_type is one of local, kubeconfig, eks": {`provider_type = "gke"`, `value must be one of`},
		"a kubeconfig runtime needs a kubeconfig":        {`provider_type = "kubeconfig"`, `kubeconfig is required for kubeconfig runtimes`},
		"nodes are only for local and eks runtimes":      {`provider_type = "kubeconfig"` + "\n" + `kubeconfig = "x"` + "\n" + `nodes = 2`, `nodes is only valid for local and eks runtimes`},
		"an eks runtime needs a cloud account":           {`provider_type = "eks"` + "\n" + `region = "us-east-1"`, `cloud_account_id is required for eks runtimes`},
		"node_type is only for eks runtimes":             {`provider_type = "local"` + "\n" + `node_type = "t3.small"`, `node_type is only valid for eks runtimes`},
		"an eks runtime needs a region":                  {`provider_type = "eks"`, `region is required for eks runtimes`},
		"min_nodes must not exceed max_nodes":            {`provider_type = "eks"` + "\n" + `region = "us-east-1"` + "\n" + `min_nodes = 5` + "\n" + `max_nodes = 2`, `min_nodes must not exceed max_nodes`},
	}
	var steps []resource.TestStep
	for _, name := range sortedNames(cases) {
		tc := cases[name]
		steps = append(steps, resource.TestStep{
			Config:      fmt.Sprintf("resource \"qleet_kubernetes_runtime\" \"bad\" {\n  name = \"bad\"\n  %s\n}\n", tc.body),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(strings.ReplaceAll(regexp.QuoteMeta(tc.want), " ", `\s+`)), // terraform wraps long lines
		})
	}
	steps = append(steps, resource.TestStep{
		Config:      "resource \"qleet_kubernetes_runtime\" \"bad\" {\n  name = \"Not_A_Label\"\n  provider_type = \"local\"\n}\n",
		PlanOnly:    true,
		ExpectError: regexp.MustCompile(`is not a DNS-1123 label`),
	})
	resource.ParallelTest(t, resource.TestCase{ProtoV6ProviderFactories: testProviders, Steps: steps})
}

// What only the API can check (here, that the kubeconfig resolves) fails apply with the API's field error,
// shown on the attribute it names.
func TestAccKubernetesRuntime_apiFieldError(t *testing.T) {
	env := testAccEnv(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             env.checkDestroyed,
		Steps: []resource.TestStep{{
			Config: `
resource "qleet_kubernetes_runtime" "bad" {
  name          = "acc-bad-kubeconfig"
  provider_type = "kubeconfig"
  kubeconfig    = "apiVersion: v1\nkind: Config\n"
}
`,
			ExpectError: regexp.MustCompile(`(?s)with qleet_kubernetes_runtime\.bad,.*\d+:\s+kubeconfig\s+=.*rejected\s+spec\.kubeconfig:\s+has\s+no\s+current-context`),
		}},
	})
}
