package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// seedsConfig is the seeds' shape: an RPC node, an app that uses it, a database, and a secret.
func seedsConfig(name, kubeconfig, value string) string {
	return fmt.Sprintf(`
resource "qleet_kubernetes_runtime" "rt" {
  name          = "%[1]s-rt"
  provider_type = "kubeconfig"
  kubeconfig    = file(%[2]s)
}

resource "qleet_workload_definition" "rpc" {
  name       = "%[1]s-rpc"
  containers = [{ name = "node", image = "nginx:1.27", ports = [{ container_port = 8545 }] }]
}

resource "qleet_workload_instance" "rpc" {
  name          = "%[1]s-rpc"
  definition_id = qleet_workload_definition.rpc.id
  runtime_id    = qleet_kubernetes_runtime.rt.id
}

resource "qleet_workload_definition" "app" {
  name       = "%[1]s-app"
  containers = [{ name = "web", image = "nginx:1.27", ports = [{ container_port = 80 }] }]
}

resource "qleet_database" "main" {
  name = "%[1]s-db"
}

resource "qleet_workload_instance" "app" {
  name          = "%[1]s-app"
  definition_id = qleet_workload_definition.app.id
  runtime_id    = qleet_kubernetes_runtime.rt.id
  uses          = [{ instance_id = qleet_workload_instance.rpc.id, env_prefix = "RPC" }]
  databases     = [qleet_database.main.id]
}

resource "qleet_secret" "api" {
  name         = "%[1]s-api"
  instance_ids = [qleet_workload_instance.app.id]
  values       = { API_TOKEN = %[3]q }
}
`, name, hclString(kubeconfig), value)
}

func TestAccSecretAndUses(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-sec")
	start := time.Now()
	marker := "acc-marker-" + name
	ctx := context.Background()
	// onlyWhereWritten checks that the value is in the state only in the secret's values.
	onlyWhereWritten := func(value string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			found := false
			for addr, rs := range s.RootModule().Resources {
				for k, v := range rs.Primary.Attributes {
					if !strings.Contains(v, value) {
						continue
					}
					if addr == "qleet_secret.api" && k == "values.API_TOKEN" {
						found = true
						continue
					}
					return fmt.Errorf("the value is in the state at %s.%s", addr, k)
				}
			}
			if !found {
				return fmt.Errorf("the configured value is not kept in the state")
			}
			return nil
		}
	}
	wantEnv := func(key, want string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			return await.Until(ctx, time.Minute, func(ctx context.Context) error {
				d, err := env.kube.AppsV1().Deployments(name+"-app").Get(ctx, name+"-app", metav1.GetOptions{})
				if err != nil {
					return err
				}
				for _, e := range d.Spec.Template.Spec.Containers[0].Env {
					if e.Name == key && (e.Value == want || e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == want) {
						return nil
					}
				}
				return fmt.Errorf("%s not %q in %+v", key, want, d.Spec.Template.Spec.Containers[0].Env)
			})
		}
	}
	secretValue := func(want string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			return await.Until(ctx, time.Minute, func(ctx context.Context) error {
				s, err := env.kube.CoreV1().Secrets(name+"-app").Get(ctx, "qleet-secret-"+name+"-api", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if got := string(s.Data["API_TOKEN"]); got != want {
					return fmt.Errorf("secret value %q, want %q", got, want)
				}
				return nil
			})
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             env.checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: seedsConfig(name, env.kubeconfig, marker),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error {
						t.Logf("seeds-shaped example (RPC node, app using it, database, secret) through terraform, apply to Ready: %s", time.Since(start).Round(time.Millisecond))
						return nil
					},
					resource.TestCheckResourceAttr("qleet_workload_instance.app", "status.phase", "Ready"),
					resource.TestCheckResourceAttr("qleet_database.main", "engine", "postgres"),
					wantEnv("DATABASE_URL", "qleet-database-"+name+"-db"),
					func(s *terraform.State) error {
						// The database's password is nowhere in the state.
						creds, err := env.kube.CoreV1().Secrets("qleet-db-"+name+"-db").Get(ctx, "credentials", metav1.GetOptions{})
						if err != nil {
							return err
						}
						pw := string(creds.Data["password"])
						for addr, r := range s.RootModule().Resources {
							for k, v := range r.Primary.Attributes {
								if pw != "" && strings.Contains(v, pw) {
									return fmt.Errorf("the database password is in the state at %s.%s", addr, k)
								}
							}
						}
						return nil
					},
					resource.TestCheckResourceAttr("qleet_workload_instance.app", "uses.0.env_prefix", "RPC"),
					resource.TestCheckResourceAttr("qleet_secret.api", "status.keys.0", "API_TOKEN"),
					wantEnv("RPC_HOST", name+"-rpc."+name+"-rpc.svc.cluster.local"),
					wantEnv("RPC_PORT", "8545"),
					wantEnv("API_TOKEN", "qleet-secret-"+name+"-api"),
					secretValue(marker),
					onlyWhereWritten(marker),
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				Config: seedsConfig(name, env.kubeconfig, marker+"-rotated"),
				Check: resource.ComposeAggregateTestCheckFunc(
					secretValue(marker+"-rotated"),
					onlyWhereWritten(marker+"-rotated"),
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				ResourceName:            "qleet_secret.api",
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"values"}, // write-only: not imported with a non-controller token
			},
			{ResourceName: "qleet_workload_instance.app", ImportState: true, ImportStateVerify: true},
		},
	})
}
