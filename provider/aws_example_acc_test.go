package provider

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

// TestAccAWSExamplePreviewIsWhatApplyDoes applies examples/aws, as written, against the AWS stand-in with
// the real terraform. The plan's warnings preview the EKS cluster the profile provisions, the app's
// placement and the database's and bucket's home; the apply then does exactly that, and a destroy
// leaves nothing in AWS.
func TestAccAWSExamplePreviewIsWhatApplyDoes(t *testing.T) {
	env := testAccEnv(t)
	t.Parallel()
	ctx := context.Background()
	d := 100 * time.Millisecond
	sim := awssim.New(awssim.Config{Kubesim: true, ClusterDelay: d, NodegroupDelay: d, DBDelay: d, DeleteDelay: d})
	if err := sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Stop(context.Background()) })
	acct, err := sim.AddAccount("")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("..", "examples", "aws", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	name := randomName("awsx")
	cfg := regexp.MustCompile(`(?m)^(\s+name\s+=\s+)"([a-z-]+)"`).ReplaceAllString(string(data), `${1}"`+name+`-${2}"`)
	for _, want := range []string{name + "-eks", name + "-shop", name + "-orders", name + "-media"} {
		if !strings.Contains(cfg, `"`+want+`"`) {
			t.Fatalf("examples/aws changed shape: %q not found after substitution", want)
		}
	}
	w := newTFWork(t)
	w.timeout = 8 * time.Minute
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	w.env = append(w.env, "TF_VAR_aws_access_key_id="+acct.AccessKeyID, "TF_VAR_aws_secret_access_key="+acct.SecretAccessKey, "TF_VAR_aws_endpoint="+sim.URL())
	w.run("init", "-input=false", "-backend=false")
	warnings, _ := w.planWarnings()
	t.Logf("terraform plan of examples/aws warns:\n%s", strings.Join(warnings, "\n"))
	previewed := map[string][]string{}
	provisioned := false
	for _, w := range warnings {
		for _, m := range placedRe.FindAllStringSubmatch(w, -1) {
			if !slices.Contains(previewed[m[1]+" "+m[2]], m[3]) {
				previewed[m[1]+" "+m[2]] = append(previewed[m[1]+" "+m[2]], m[3])
			}
		}
		provisioned = provisioned || (strings.Contains(w, "provision") && strings.Contains(w, name+"-eks"))
	}
	if !provisioned {
		t.Fatalf("the plan does not preview the EKS cluster provisioned from runtime_profile %s-eks:\n%s", name, strings.Join(warnings, "\n"))
	}

	w.run("apply", "-auto-approve", "-input=false", "-lock=false")
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			w.run("destroy", "-auto-approve", "-input=false", "-lock=false")
		}
	})
	shop, err := env.api.WorkloadInstances().GetByName(ctx, name+"-shop")
	if err != nil {
		t.Fatal(err)
	}
	db, err := env.api.Databases().GetByName(ctx, name+"-orders")
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := env.api.Buckets().GetByName(ctx, name+"-media")
	if err != nil {
		t.Fatal(err)
	}
	did := map[string][]string{}
	for _, p := range shop.Status.Placements {
		did["workload_instance "+shop.Name] = append(did["workload_instance "+shop.Name], p.Runtime)
	}
	if db.Status.Home == nil || bucket.Status.Home == nil {
		t.Fatalf("no home after apply: database %+v, bucket %+v", db.Status.Home, bucket.Status.Home)
	}
	did["database "+db.Name] = []string{db.Status.Home.Runtime}
	did["bucket "+bucket.Name] = []string{bucket.Status.Home.Runtime}
	for k := range did {
		if len(previewed[k]) == 0 {
			t.Fatalf("the plan does not preview where %s goes:\n%s", k, strings.Join(warnings, "\n"))
		}
	}
	for k, runtimes := range previewed {
		if !strings.HasPrefix(strings.SplitN(k, " ", 2)[1], name) {
			continue
		}
		slices.Sort(runtimes)
		got := slices.Sorted(slices.Values(did[k]))
		if !slices.Equal(runtimes, got) {
			t.Fatalf("%s: the plan previewed %v, the apply did %v", k, runtimes, got)
		}
	}
	for _, rs := range db.Status.Runtimes {
		if rs.Phase != api.PhaseReady || !strings.Contains(rs.Host, ".rds.") {
			t.Fatalf("the database on %s: %s %q at %q", rs.Runtime, rs.Phase, rs.Message, rs.Host)
		}
	}
	types := map[string]int{}
	for _, r := range sim.Resources() {
		types[r.Type]++
	}
	for _, want := range []string{"cluster", "db-instance", "bucket"} {
		if types[want] != 1 {
			t.Fatalf("want one %s in AWS, got %v", want, types)
		}
	}
	if out := string(w.run("plan", "-input=false", "-lock=false")); !strings.Contains(out, "No changes.") {
		t.Fatalf("a second plan is not empty:\n%s", out)
	}
	w.run("destroy", "-auto-approve", "-input=false", "-lock=false")
	destroyed = true
	if _, err := env.api.Databases().Get(ctx, db.ID); !api.IsNotFound(err) {
		t.Fatalf("the database outlived destroy: %v", err)
	}
	left := 0
	for _, r := range sim.Resources() {
		if r.Type == "db-instance" || r.Type == "bucket" || r.Type == "db-subnet-group" {
			left++
			t.Errorf("left in AWS after destroy: %+v", r)
		}
	}
	if left > 0 {
		t.Fatalf("%d data resources outlived destroy", left)
	}
}
