package provider

import (
	"fmt"
	"net"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccSupportServiceUnreachableChartEndsTheApply: a support service whose chart repository cannot be
// reached (a closed port) ends `terraform apply` with the reason, ChartUnreachable and the repository,
// instead of leaving it at "Still creating..." until its timeout.
func TestAccSupportServiceUnreachableChartEndsTheApply(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-chart")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	repo := "http://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             env.checkDestroyed,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "qleet_kubernetes_runtime" "rt" {
  name          = "%[1]s-rt"
  provider_type = "kubeconfig"
  kubeconfig    = file(%[2]s)
}

resource "qleet_support_service" "dns" {
  name       = "%[1]s-dns"
  runtime_id = qleet_kubernetes_runtime.rt.id
  type       = "external-dns"
  repository = %[3]q
}
`, name, hclString(env.kubeconfig), repo),
			ExpectError: regexp.MustCompile(`(?s)stalled \(ChartUnreachable\).*` + regexp.QuoteMeta(repo)),
		}},
	})
}
