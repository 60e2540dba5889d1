package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// placedRe finds a preview's placements: `will place <kind> "<name>" on kubernetes_runtime "<runtime>"`.
var placedRe = regexp.MustCompile(`will place ([a-z_]+) "([^"]+)" on kubernetes_runtime "([^"]+)"`)

// seedsExampleConfig is examples/seeds/main.tf with names, regions and the host of its own, so that it runs
// beside the other tests.
func seedsExampleConfig(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "seeds", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := regexp.MustCompile(`(?m)^(\s+name\s+=\s+)"([a-z-]+)"`).ReplaceAllString(string(data), `${1}"`+name+`-${2}"`)
	cfg = strings.NewReplacer(
		`["eu-west", "us-east"]`, fmt.Sprintf(`["%[1]s-eu", "%[1]s-us"]`, name),
		`app.seeds.test`, name+".seeds.test",
	).Replace(cfg)
	for _, want := range []string{name + "-eu", name + "-seeds", name + "-rpc", name + ".seeds.test", `placement = "with_consumers"`} {
		if !strings.Contains(cfg, want) {
			t.Fatalf("examples/seeds changed shape: %q not found after substitution", want)
		}
	}
	return cfg
}

// TestAccSeedsExample applies examples/seeds end to end with the real terraform: an app in two regions
// on clusters provisioned from the profile, one database with its home in the app's first region, used
// from both, and an RPC node that follows the app into both. A second plan is empty, and destroy
// leaves no node, database or cluster behind. The plan's warnings preview the clusters, where the node
// follows the app and the database's home, and the apply does exactly that.
func TestAccSeedsExample(t *testing.T) {
	env := testAccEnv(t)
	t.Parallel()
	name := randomName("seeds")
	w := newTFWork(t)
	w.timeout = 8 * time.Minute
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(seedsExampleConfig(t, name)), 0o644); err != nil {
		t.Fatal(err)
	}
	w.env = append(w.env, "TF_VAR_api_token=seeds-token")
	w.run("init", "-input=false", "-backend=false")
	warnings, _ := w.planWarnings()
	t.Logf("terraform plan of examples/seeds warns:\n%s", strings.Join(warnings, "\n"))
	previewed := map[string][]string{} // "kind name" -> runtimes, as the plan says
	for _, w := range warnings {
		for _, m := range placedRe.FindAllStringSubmatch(w, -1) {
			previewed[m[1]+" "+m[2]] = append(previewed[m[1]+" "+m[2]], m[3])
		}
	}
	start := time.Now()
	w.run("apply", "-auto-approve", "-input=false", "-lock=false", "-var", "api_token=seeds-token")
	t.Logf("terraform apply of examples/seeds (two clusters, a database, a node that follows the app): %s", time.Since(start).Round(time.Second))
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			w.run("destroy", "-auto-approve", "-input=false", "-lock=false", "-var", "api_token=seeds-token")
		}
	})

	ctx := context.Background()
	app, err := env.api.WorkloadInstances().GetByName(ctx, name+"-app")
	if err != nil {
		t.Fatal(err)
	}
	regionOf := map[string]string{} // runtime id -> region
	for _, p := range app.Status.Placements {
		regionOf[p.RuntimeID] = p.Region
	}
	if len(regionOf) != 2 {
		t.Fatalf("the app runs on %d runtimes, want 2: %+v", len(regionOf), app.Status.Placements)
	}

	db, err := env.api.Databases().GetByName(ctx, name+"-seeds")
	if err != nil {
		t.Fatal(err)
	}
	if db.Status.Home == nil || db.Status.Home.Region != name+"-eu" {
		t.Fatalf("want the database's home in the app's first region %s-eu, got %+v", name, db.Status.Home)
	}
	roles := map[string]string{}
	for _, rs := range db.Status.Runtimes {
		roles[regionOf[rs.RuntimeID]] = rs.Role
		if rs.Phase != api.PhaseReady {
			t.Fatalf("the database on %s is %s: %s", rs.Runtime, rs.Phase, rs.Message)
		}
	}
	if want := map[string]string{name + "-eu": api.DataRoleHome, name + "-us": api.DataRoleAccess}; fmt.Sprint(roles) != fmt.Sprint(want) {
		t.Fatalf("one database used from two regions: want roles %v, got %v", want, roles)
	}

	rpc, err := env.api.WorkloadInstances().GetByName(ctx, name+"-rpc")
	if err != nil {
		t.Fatal(err)
	}
	var followed []string
	for _, p := range rpc.Status.Placements {
		if p.Phase != api.PhaseReady || len(p.Consumers) != 1 || p.Consumers[0].ID != app.ID {
			t.Fatalf("the node on %s: phase %s, consumers %v", p.Runtime, p.Phase, p.Consumers)
		}
		followed = append(followed, regionOf[p.RuntimeID])
	}
	slices.Sort(followed)
	if want := []string{name + "-eu", name + "-us"}; !slices.Equal(followed, want) {
		t.Fatalf("the node follows the app: want it in %v, got %v", want, followed)
	}

	// What the plan said is what the apply did: the node on both of the app's runtimes, the
	// database's home on the first.
	did := map[string][]string{}
	for _, p := range app.Status.Placements {
		did["workload_instance "+app.Name] = append(did["workload_instance "+app.Name], p.Runtime)
	}
	for _, p := range rpc.Status.Placements {
		did["workload_instance "+rpc.Name] = append(did["workload_instance "+rpc.Name], p.Runtime)
	}
	did["database "+db.Name] = []string{db.Status.Home.Runtime}
	for k := range did {
		slices.Sort(did[k])
		slices.Sort(previewed[k])
	}
	if fmt.Sprint(did) != fmt.Sprint(previewed) {
		t.Fatalf("the plan previewed\n  %v\nthe apply did\n  %v", previewed, did)
	}

	if out := string(w.run("plan", "-input=false", "-lock=false", "-var", "api_token=seeds-token")); !strings.Contains(out, "No changes.") {
		t.Fatalf("a second plan is not empty:\n%s", out)
	}

	w.run("destroy", "-auto-approve", "-input=false", "-lock=false", "-var", "api_token=seeds-token")
	destroyed = true
	for _, id := range []string{app.ID, rpc.ID} {
		if _, err := env.api.WorkloadInstances().Get(ctx, id); !api.IsNotFound(err) {
			t.Fatalf("workload_instance %s outlived destroy: %v", id, err)
		}
	}
	if _, err := env.api.Databases().Get(ctx, db.ID); !api.IsNotFound(err) {
		t.Fatalf("the database outlived destroy: %v", err)
	}
}
