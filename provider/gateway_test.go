package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// gatewayConfig adds a zone, a gateway with TLS and a declared support service to instanceConfig.
func gatewayConfig(name, kubeconfig, gatewayExtra string) string {
	return instanceConfig(name, kubeconfig, "nginx:1.27", "") + fmt.Sprintf(`
resource "qleet_domain_name" "zone" {
  name = "%[1]s-zone"
  zone = "%[1]s.test"
}

resource "qleet_gateway" "web" {
  name        = %[1]q
  instance_id = qleet_workload_instance.web.id
  hosts       = ["app.%[1]s.test"]
  %[2]s
  depends_on = [qleet_domain_name.zone]
}

resource "qleet_support_service" "metrics" {
  name       = "%[1]s-metrics"
  runtime_id = qleet_kubernetes_runtime.rt.id
  type       = "metrics-server"
}
`, name, gatewayExtra)
}

func TestAccGateway(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-gw")
	addr := "qleet_gateway.web"
	ctx := context.Background()
	start := time.Now()
	records := func(want int) resource.TestCheckFunc {
		return func(*terraform.State) error {
			return await.Until(ctx, 30*time.Second, func(ctx context.Context) error {
				d, err := env.api.DomainNames().GetByName(ctx, name+"-zone")
				if err != nil {
					return err
				}
				if len(d.Status.Records) != want {
					return fmt.Errorf("records = %+v, want %d", d.Status.Records, want)
				}
				return nil
			})
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: resource.ComposeTestCheckFunc(env.checkDestroyed, func(*terraform.State) error {
			// The route, the certificate and its secret are gone from the cluster; the support services
			// the gateway installed go after the owner grace.
			return await.Until(ctx, time.Minute, func(ctx context.Context) error {
				if _, err := env.kube.NetworkingV1().Ingresses(name).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("ingress still there: %w", err)
				}
				for ss, err := range env.api.SupportServices().All(ctx, client.ListOptions{}) {
					if err != nil {
						return err
					}
					if len(ss.Owners) > 0 && ss.Owners[0].Name == name {
						return fmt.Errorf("support service %s still there", ss.Name)
					}
				}
				return nil
			})
		}),
		Steps: []resource.TestStep{
			{
				Config:      gatewayConfig(name, env.kubeconfig, `port = 0`),
				ExpectError: regexp.MustCompile(`(?s)port.*between 1 and 65535`),
			},
			{
				Config: gatewayConfig(name, env.kubeconfig, ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error {
						t.Logf("apply of an app plus a gateway with TLS on a fresh cluster, to Ready: %s", time.Since(start).Round(time.Millisecond))
						return nil
					},
					resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
					resource.TestCheckResourceAttr(addr, "status.url", "https://app."+name+".test/"),
					resource.TestCheckResourceAttr(addr, "status.runtimes.#", "1"),
					resource.TestCheckResourceAttr(addr, "status.runtimes.0.certificate_ready", "true"),
					resource.TestMatchResourceAttr(addr, "status.runtimes.0.address", regexp.MustCompile(`^172\.18\.255\.`)),
					resource.TestMatchResourceAttr(addr, "status.runtimes.0.certificate_expiry", regexp.MustCompile(`^20\d\d-`)),
					resource.TestCheckResourceAttr(addr, "paths.#", "1"),
					resource.TestCheckResourceAttr(addr, "paths.0", "/"),
					resource.TestCheckResourceAttr("qleet_domain_name.zone", "dns_provider", "none"),
					resource.TestCheckResourceAttr("qleet_support_service.metrics", "status.phase", "Ready"),
					resource.TestCheckResourceAttr("qleet_support_service.metrics", "status.namespace", "kube-system"),
					records(1),
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				// TLS off: the certificate goes, the URL is http.
				Config: gatewayConfig(name, env.kubeconfig, `tls = false`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "status.url", "http://app."+name+".test/"),
					resource.TestCheckResourceAttr(addr, "status.runtimes.0.certificate_ready", "false"),
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true},
			{ResourceName: "qleet_domain_name.zone", ImportState: true, ImportStateVerify: true},
			{ResourceName: "qleet_support_service.metrics", ImportState: true, ImportStateVerify: true},
		},
	})
}
