package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

// eksAppConfig is the story: a cloud account, a profile with provider eks in us-east-1, and an
// app placed there with a database and a bucket.
func eksAppConfig(name string, acct awssim.Account, endpoint string) string {
	return fmt.Sprintf(`
resource "qleet_cloud_account" "aws" {
  name              = "%[1]s-aws"
  provider_type     = "aws"
  region            = "us-east-1"
  access_key_id     = %[2]q
  secret_access_key = %[3]q
  endpoint          = %[4]q
}

resource "qleet_runtime_profile" "eks" {
  name             = "%[1]s-eks"
  provider_type    = "eks"
  regions          = ["us-east-1"]
  cloud_account_id = qleet_cloud_account.aws.id
  min_nodes        = 1
  max_nodes        = 3
  priority         = 15
}

resource "qleet_workload_definition" "web" {
  name       = "%[1]s-web"
  containers = [{ name = "web", image = "nginx:1.27", ports = [{ container_port = 80 }] }]
}

resource "qleet_database" "db" {
  name = "%[1]s-db"
}

resource "qleet_bucket" "media" {
  name = "%[1]s-media"
}

resource "qleet_workload_instance" "shop" {
  name          = "%[1]s-shop"
  definition_id = qleet_workload_definition.web.id
  placement     = { regions = ["us-east-1"] }
  databases     = [qleet_database.db.id]
  buckets       = [qleet_bucket.media.id]
  depends_on    = [qleet_runtime_profile.eks]
}

data "qleet_cloud_account" "aws" {
  name       = qleet_cloud_account.aws.name
  depends_on = [qleet_cloud_account.aws]
}
`, name, acct.AccessKeyID, acct.SecretAccessKey, endpoint)
}

func TestAccAppOnEKS(t *testing.T) {
	env := testAccEnv(t)
	ctx := context.Background()
	sim := awssim.New(awssim.Config{Kubesim: true, ClusterDelay: 100 * time.Millisecond, NodegroupDelay: 100 * time.Millisecond,
		DBDelay: 100 * time.Millisecond, DeleteDelay: 100 * time.Millisecond})
	if err := sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Stop(context.Background()) })
	acct, err := sim.AddAccount("")
	if err != nil {
		t.Fatal(err)
	}
	name := randomName("acc-eks")
	start := time.Now()
	counts := func() string {
		m := map[string]int{}
		for _, c := range sim.Calls() {
			if c.Params["via"] == "eks-token" {
				m["eks-token checks"]++
				continue
			}
			m[c.Service]++
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return strings.Join(parts, ", ")
	}
	// The secret access key is in the state only where the configuration wrote it.
	secretOnlyWhereWritten := func(s *terraform.State) error {
		for addr, rs := range s.RootModule().Resources {
			for k, v := range rs.Primary.Attributes {
				if strings.Contains(v, acct.SecretAccessKey) && (addr != "qleet_cloud_account.aws" || k != "secret_access_key") {
					return fmt.Errorf("the secret access key is in the state at %s.%s", addr, k)
				}
			}
		}
		return nil
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: func(s *terraform.State) error {
			if err := env.checkDestroyed(s); err != nil {
				return err
			}
			if res := sim.Resources(); len(res) > 0 {
				return fmt.Errorf("destroy left %d resources in AWS: %+v", len(res), res)
			}
			t.Logf("destroy: nothing left in the stand-in; AWS calls since the apply: %s", counts())
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: eksAppConfig(name, acct, sim.URL()),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("qleet_workload_instance.shop", "status.phase", "Ready"),
					resource.TestCheckResourceAttr("qleet_cloud_account.aws", "status.account_id", acct.ID),
					resource.TestCheckResourceAttr("data.qleet_cloud_account.aws", "status.account_id", acct.ID),
					resource.TestCheckNoResourceAttr("data.qleet_cloud_account.aws", "secret_access_key"),
					resource.TestCheckResourceAttr("qleet_database.db", "status.phase", "Ready"),
					resource.TestCheckResourceAttr("qleet_bucket.media", "status.phase", "Ready"),
					secretOnlyWhereWritten,
					func(*terraform.State) error {
						types := map[string]int{}
						for _, r := range sim.Resources() {
							types[r.Type]++
						}
						for _, want := range []string{"cluster", "nodegroup", "db-instance", "bucket"} {
							if types[want] != 1 {
								return fmt.Errorf("want one %s in the stand-in, have %v", want, types)
							}
						}
						t.Logf("terraform apply to Ready in %s; AWS calls per service: %s", time.Since(start).Round(100*time.Millisecond), counts())
						sim.ResetCalls()
						return nil
					},
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				ResourceName:            "qleet_cloud_account.aws",
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"secret_access_key"}, // write-only: never read back with a non-controller token
			},
		},
	})
}
