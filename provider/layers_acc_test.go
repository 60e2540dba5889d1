package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// tfEvent is one line of terraform's -json output that the tests read.
type tfEvent struct {
	Type       string `json:"type"`
	Diagnostic struct {
		Severity, Summary, Detail string
	} `json:"diagnostic"`
	Hook struct {
		Resource struct {
			Addr string `json:"addr"`
		} `json:"resource"`
		Action string `json:"action"`
	} `json:"hook"`
}

func tfEvents(t *testing.T, out []byte) []tfEvent {
	t.Helper()
	var evs []tfEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev tfEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			evs = append(evs, ev)
		}
	}
	return evs
}

func warningsOf(evs []tfEvent) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == "diagnostic" && ev.Diagnostic.Severity == "warning" {
			out = append(out, ev.Diagnostic.Summary+": "+ev.Diagnostic.Detail)
		}
	}
	return out
}

// quickstartConfig is examples/quickstart/main.tf with names and regions of its own, so that it runs
// beside the other tests: the profile, the instance and the host are named after name.
func quickstartConfig(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "quickstart", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer(
		`name          = "default"`, fmt.Sprintf(`name          = "%s-p"`, name),
		`regions       = ["eu-west", "us-east"]`, fmt.Sprintf(`regions       = ["%[1]s-eu", "%[1]s-us"]`, name),
		`regions = ["eu-west", "us-east"]`, fmt.Sprintf(`regions = ["%[1]s-eu", "%[1]s-us"]`, name),
		`name = "hello"`, fmt.Sprintf(`name = %q`, name),
		`name          = "hello"`, fmt.Sprintf(`name          = %q`, name),
		`name        = "hello"`, fmt.Sprintf(`name        = %q`, name),
		`hello.example.test`, name+".example.test",
	)
	cfg := r.Replace(string(data))
	for _, want := range []string{name + "-p", name + "-eu", name + ".example.test"} {
		if strings.Count(cfg, want) == 0 {
			t.Fatalf("the quickstart changed shape: %q not substituted", want)
		}
	}
	return cfg
}

// previewed is what a plan's warnings say the controllers will do.
type previewed struct {
	provisioned map[string]string   // runtime -> "region from profile"
	installed   map[string][]string // runtime -> support types
	placed      []string            // "instance on runtime"
}

var (
	provisionRe = regexp.MustCompile(`will provision kubernetes_runtime "([^"]+)" in (\S+) from runtime_profile "([^"]+)"`)
	installRe   = regexp.MustCompile(`will install support_service ([a-z-]+(?:, [a-z-]+)*) on kubernetes_runtime "([^"]+)"`)
	placeRe     = regexp.MustCompile(`will place workload_instance "([^"]+)" on kubernetes_runtime "([^"]+)"`)
)

func parsePreview(warnings []string) previewed {
	p := previewed{provisioned: map[string]string{}, installed: map[string][]string{}}
	for _, w := range warnings {
		for _, m := range provisionRe.FindAllStringSubmatch(w, -1) {
			p.provisioned[m[1]] = m[2] + " from " + m[3]
		}
		for _, m := range installRe.FindAllStringSubmatch(w, -1) {
			// One warning per resource: the gateway's and the instance's installs on a runtime add up.
			types := append(p.installed[m[2]], strings.Split(m[1], ", ")...)
			sort.Strings(types)
			p.installed[m[2]] = slices.Compact(types)
		}
		for _, m := range placeRe.FindAllStringSubmatch(w, -1) {
			p.placed = append(p.placed, m[1]+" on "+m[2])
		}
	}
	sort.Strings(p.placed)
	return p
}

// TestAccQuickstartPlanThenApply plans examples/quickstart (profile, definition, instance and gateway
// in one configuration) with the real terraform, then applies it, and compares: the plan's warnings
// name the clusters provisioned (profile, region), the support services installed on each and the
// placements, and the apply made exactly those.
func TestAccQuickstartPlanThenApply(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("qs")
	w := newTFWork(t)
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(quickstartConfig(t, name)), 0o644); err != nil {
		t.Fatal(err)
	}
	w.run("init", "-input=false", "-backend=false")
	warnings, took := w.planWarnings()
	t.Logf("terraform plan of the quickstart: %s\n%s", took.Round(time.Millisecond), strings.Join(warnings, "\n"))
	eu, us := fmt.Sprintf("%[1]s-p-%[1]s-eu", name), fmt.Sprintf("%[1]s-p-%[1]s-us", name)
	want := previewed{
		provisioned: map[string]string{eu: name + "-eu from " + name + "-p", us: name + "-us from " + name + "-p"},
		// The gateway's ingress and cert-manager; metrics-server for the app's autoscaler.
		installed: map[string][]string{eu: {"cert-manager", "ingress", "metrics-server"}, us: {"cert-manager", "ingress", "metrics-server"}},
		placed:    []string{name + " on " + eu, name + " on " + us},
	}
	plan := parsePreview(warnings)
	if fmt.Sprint(plan) != fmt.Sprint(want) {
		t.Fatalf("the plan previews\n  %v\nwant\n  %v\nwarnings:\n%s", plan, want, strings.Join(warnings, "\n"))
	}
	if err := noRuntime(env, eu)(nil); err != nil {
		t.Fatal(err)
	}

	w.run("apply", "-auto-approve", "-input=false", "-lock=false")
	t.Cleanup(func() { w.run("destroy", "-auto-approve", "-input=false", "-lock=false") })

	ctx := context.Background()
	done := previewed{provisioned: map[string]string{}, installed: map[string][]string{}}
	rts, err := env.api.KubernetesRuntimes().List(ctx, client.ListOptions{LabelSelector: api.LabelProfile + "=" + name + "-p"})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range rts.Items {
		done.provisioned[rt.Name] = rt.Spec.Region + " from " + rt.Labels[api.LabelProfile]
		sss, err := env.api.SupportServices().List(ctx, client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ss := range sss.Items {
			if ss.Spec.RuntimeID == rt.ID {
				done.installed[rt.Name] = append(done.installed[rt.Name], ss.Spec.Type)
			}
		}
		sort.Strings(done.installed[rt.Name])
	}
	inst, err := env.api.WorkloadInstances().GetByName(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range inst.Status.Placements {
		done.placed = append(done.placed, name+" on "+pl.Runtime)
	}
	sort.Strings(done.placed)
	if fmt.Sprint(done) != fmt.Sprint(plan) {
		t.Fatalf("the apply did\n  %v\nthe plan said\n  %v", done, plan)
	}
}

// TestAccRemoveDatabaseAndItsUse removes a qleet_database and the instance's reference to it in one
// apply, with the real terraform. Terraform applies the delete before the instance's update (the
// update waits for it); the delete removes the reference, says so, and the apply succeeds.
func TestAccRemoveDatabaseAndItsUse(t *testing.T) {
	env := testAccEnv(t)
	t.Parallel()
	name := randomName("acc-rmdb")
	w := newTFWork(t)
	db := fmt.Sprintf(`
resource "qleet_database" "db" {
  name           = "%s-db"
  wait_for_ready = false
}
`, name)
	w.write(instanceConfig(name, env.kubeconfig, "nginx:1.27", "databases = [qleet_database.db.id]\n  wait_for_ready = false") + db)
	w.run("init", "-input=false", "-backend=false")
	w.run("apply", "-auto-approve", "-input=false", "-lock=false")
	t.Cleanup(func() { w.run("destroy", "-auto-approve", "-input=false", "-lock=false") })
	ctx := context.Background()
	made, err := env.api.Databases().GetByName(ctx, name+"-db")
	if err != nil {
		t.Fatal(err)
	}

	w.write(instanceConfig(name, env.kubeconfig, "nginx:1.27", "wait_for_ready = false"))
	evs := tfEvents(t, w.run("apply", "-auto-approve", "-input=false", "-lock=false", "-json"))
	// The order terraform chose: the delete completes before the update starts.
	var order []string
	for _, ev := range evs {
		if (ev.Type == "apply_start" || ev.Type == "apply_complete") && ev.Hook.Resource.Addr != "" {
			order = append(order, ev.Type+" "+ev.Hook.Resource.Addr)
		}
	}
	deleted := slices.Index(order, "apply_complete qleet_database.db")
	updating := slices.Index(order, "apply_start qleet_workload_instance.web")
	if deleted < 0 || updating < 0 || deleted > updating {
		t.Fatalf("want the database's delete to complete before the instance's update starts, got %q", order)
	}
	t.Logf("terraform %s applied: %s", w.bin, strings.Join(order, "; "))
	warnings := warningsOf(evs)
	wantWarning := fmt.Sprintf(`database "%s-db" was removed from the instances that used it: Before deleting it, QleetOS removed it from workload_instance %q`, name, name)
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.HasPrefix(w, wantWarning) }) {
		t.Fatalf("want a warning starting %q, got %q", wantWarning, warnings)
	}
	await.True(t, time.Minute, func() bool {
		_, err := env.api.Databases().Get(ctx, made.ID)
		return api.IsNotFound(err)
	}, "the database %s is gone", made.ID)
	inst, err := env.api.WorkloadInstances().GetByName(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.Spec.Databases) != 0 {
		t.Fatalf("the instance still lists %v", inst.Spec.Databases)
	}
	// And nothing is left to change.
	if out := w.run("plan", "-input=false", "-lock=false", "-detailed-exitcode"); !bytes.Contains(out, []byte("No changes")) {
		t.Fatalf("want no changes after the apply, got\n%s", out)
	}
}

// TestAccPlanDataSourceIsThePlansAPI: qleet_plan answers what POST /v1/plans does for the same changes,
// action for action, with the same summary and warnings.
func TestAccPlanDataSourceIsThePlansAPI(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-plansame")
	planProfile(t, env, name)
	instSpec := fmt.Sprintf(`{"definition_id":"def","placement":{"regions":["%[1]s-r","%[1]s-nowhere"]}}`, name)
	defSpec := `{"containers":[{"name":"web","image":"nginx:1.27"}]}`
	gwSpec := `{"instance_id":"inst","hosts":["` + name + `.example.test"]}`
	req := api.PlanRequest{Changes: []api.PlanChange{
		{Op: api.PlanCreate, Kind: api.KindWorkloadInstance, ID: "inst", Name: name, Spec: json.RawMessage(instSpec)},
		{Op: api.PlanCreate, Kind: api.KindWorkloadDefinition, ID: "def", Name: name, Spec: json.RawMessage(defSpec)},
		{Op: api.PlanCreate, Kind: api.KindGateway, Name: name, Spec: json.RawMessage(gwSpec)},
	}}
	config := fmt.Sprintf(`
data "qleet_plan" "p" {
  changes = [
    { op = "create", kind = "workload_instance", id = "inst", name = %[1]q, spec_json = %[2]s },
    { op = "create", kind = "workload_definition", id = "def", name = %[1]q, spec_json = %[3]s },
    { op = "create", kind = "gateway", name = %[1]q, spec_json = %[4]s },
  ]
}
`, name, hclString(instSpec), hclString(defSpec), hclString(gwSpec))
	same := func(s *terraform.State) error {
		want, err := env.api.Plan(context.Background(), req)
		if err != nil {
			return err
		}
		got := s.RootModule().Resources["data.qleet_plan.p"].Primary.Attributes
		if len(want.Warnings) == 0 {
			return fmt.Errorf("want a warning for %s-nowhere", name)
		}
		check := func(key, want string) error {
			if got[key] != want {
				return fmt.Errorf("%s: data source %q, API %q", key, got[key], want)
			}
			return nil
		}
		errs := []error{check("actions.#", fmt.Sprint(len(want.Actions))), check("summary.#", fmt.Sprint(len(want.Summary()))),
			check("warnings.#", fmt.Sprint(len(want.Warnings)))}
		for i, a := range want.Actions {
			errs = append(errs, check(fmt.Sprintf("actions.%d.description", i), a.String()), check(fmt.Sprintf("actions.%d.id", i), a.ID),
				check(fmt.Sprintf("actions.%d.requested", i), fmt.Sprint(a.Requested)))
		}
		for i, l := range want.Summary() {
			errs = append(errs, check(fmt.Sprintf("summary.%d", i), l))
		}
		for i, l := range want.Warnings {
			errs = append(errs, check(fmt.Sprintf("warnings.%d", i), l))
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps:                    []resource.TestStep{{Config: config, Check: same}},
	})
}
