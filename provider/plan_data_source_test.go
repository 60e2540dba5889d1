package provider

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// planProfile creates a runtime profile serving one region of its own, so that plans in that region
// provision from it and from nothing else.
func planProfile(t *testing.T, env *accEnv, name string) {
	t.Helper()
	ctx := context.Background()
	p, err := env.api.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: name},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{name + "-r"}, Nodes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.api.RuntimeProfiles().Delete(context.Background(), p.ID, client.DeleteOptions{}) })
}

// noRuntime checks that the plan provisioned nothing.
func noRuntime(env *accEnv, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := env.api.KubernetesRuntimes().GetByName(context.Background(), name)
		if !api.IsNotFound(err) {
			return fmt.Errorf("kubernetes_runtime %q: want none after a plan, got err=%w", name, err)
		}
		return nil
	}
}

func TestAccPlanDataSource(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-plan")
	planProfile(t, env, name)
	config := func(image string) string {
		return fmt.Sprintf(`
data "qleet_plan" "p" {
  changes = [
    {
      op   = "create"
      kind = "workload_instance"
      name = %[1]q
      spec_json = jsonencode({
        definition_id = "def"
        placement     = { regions = ["%[1]s-r"] }
      })
    },
    {
      op        = "create"
      kind      = "workload_definition"
      id        = "def"
      name      = %[1]q
      spec_json = jsonencode({ containers = [{ name = "web", image = %[2]q }] })
    },
  ]
}
`, name, image)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				Config: config("nginx:1.27"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("data.qleet_plan.p", "actions.0.description", fmt.Sprintf(`create workload_definition %q: requested`, name)),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "actions.0.requested", "true"),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "actions.3.action", "provision"),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "actions.3.name", name+"-"+name+"-r"),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "actions.3.region", name+"-r"),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "actions.3.profile", name),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "actions.3.cause_name", name),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "actions.3.requested", "false"),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "summary.#", "1"),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "summary.0",
						fmt.Sprintf(`will provision kubernetes_runtime "%[1]s-%[1]s-r" in %[1]s-r from runtime_profile %[1]q`, name)),
					resource.TestCheckResourceAttr("data.qleet_plan.p", "warnings.#", "0"),
					noRuntime(env, name+"-"+name+"-r"),
				),
			},
			{
				// The API's own validation, naming the change and the field.
				Config:      config("Not An Image"),
				ExpectError: regexp.MustCompile(`changes\[1\]\.spec\.containers\[0\]\.image`),
			},
		},
	})
}

// serveProvider serves the provider in-process for a terraform binary the test runs itself, and
// returns the TF_REATTACH_PROVIDERS value that points terraform at it.
func serveProvider(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	// OpenTofu resolves qleetos/qleet on its own registry, which TF_ACC_PROVIDER_HOST names (as for the
	// testing framework's own reattach): make test-tofu sets it to registry.opentofu.org.
	addr := cmp.Or(os.Getenv(resource.EnvTfAccProviderHost), "registry.terraform.io") + "/qleetos/qleet"
	go func() {
		err := tf6server.Serve(addr, func() tfprotov6.ProviderServer { return providerserver.NewProtocol6(New("test")())() },
			tf6server.WithDebug(ctx, reattach, closed), tf6server.WithGoPluginLogger(hclog.NewNullLogger()), tf6server.WithoutLogStderrOverride())
		if err != nil {
			t.Errorf("serve provider: %v", err)
		}
	}()
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-time.After(30 * time.Second):
		t.Fatal("the provider did not start serving")
	}
	t.Cleanup(func() {
		cancel()
		<-closed
	})
	data, err := json.Marshal(map[string]any{addr: map[string]any{
		"Protocol": rc.Protocol, "ProtocolVersion": rc.ProtocolVersion, "Pid": rc.Pid, "Test": rc.Test,
		"Addr": map[string]string{"Network": rc.Addr.Network(), "String": rc.Addr.String()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// tfWork is a working directory where the test runs the real terraform itself, against the provider
// served in-process, so that it can read what terraform shows (warnings, which the testing framework
// does not expose).
type tfWork struct {
	t   *testing.T
	dir string
	bin string
	env []string
	// timeout bounds each terraform command (default 3 minutes).
	timeout time.Duration
}

func newTFWork(t *testing.T) *tfWork {
	t.Helper()
	bin := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if bin == "" {
		t.Skip("needs TF_ACC_TERRAFORM_PATH (the real terraform binary)")
	}
	return &tfWork{t: t, dir: t.TempDir(), bin: bin,
		env: append(os.Environ(), "TF_REATTACH_PROVIDERS="+serveProvider(t), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")}
}

// write replaces the configuration.
func (w *tfWork) write(config string) {
	cfg := "terraform {\n  required_providers {\n    qleet = { source = \"qleetos/qleet\" }\n  }\n}\n" + config
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// run runs terraform and returns its standard output.
func (w *tfWork) run(args ...string) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(w.timeout, 3*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, w.bin, args...)
	cmd.Dir, cmd.Env = w.dir, w.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("terraform %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// planWarnings runs `terraform plan -json` and returns the warnings it shows ("summary: detail"), and
// how long the plan took.
func (w *tfWork) planWarnings() ([]string, time.Duration) {
	start := time.Now()
	out := w.run("plan", "-json", "-input=false", "-lock=false")
	took := time.Since(start)
	var warnings []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Type       string `json:"type"`
			Diagnostic struct {
				Severity, Summary, Detail string
			} `json:"diagnostic"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Type == "diagnostic" && line.Diagnostic.Severity == "warning" {
			warnings = append(warnings, line.Diagnostic.Summary+": "+line.Diagnostic.Detail)
		}
	}
	return warnings, took
}

// TestAccPlanWarning runs the real terraform's plan: a new definition and an instance placed in a region
// only a profile serves. The instance's plan warns that a runtime will be provisioned (its definition_id
// is known only after apply, and that does not stop the preview); nothing is written.
func TestAccPlanWarning(t *testing.T) {
	env := testAccEnv(t)
	t.Parallel()
	name := randomName("acc-planw")
	planProfile(t, env, name)
	w := newTFWork(t)
	w.write(fmt.Sprintf(`
resource "qleet_workload_definition" "web" {
  name       = %[1]q
  containers = [{ name = "web", image = "nginx:1.27" }]
}

resource "qleet_workload_instance" "web" {
  name          = %[1]q
  definition_id = qleet_workload_definition.web.id
  placement     = { regions = ["%[1]s-r"] }
}
`, name))
	w.run("init", "-input=false", "-backend=false")
	warnings, took := w.planWarnings()
	t.Logf("terraform plan with previews: %s", took.Round(time.Millisecond))
	want := fmt.Sprintf(`workload instance %[1]q: the QleetOS controllers will do more than this change: will provision kubernetes_runtime "%[1]s-%[1]s-r" in %[1]s-r from runtime_profile %[1]q; `+
		`will place workload_instance %[1]q on kubernetes_runtime "%[1]s-%[1]s-r" in %[1]s-r`, name)
	if len(warnings) != 1 || warnings[0] != want {
		t.Fatalf("want one warning\n  %s\ngot %q", want, warnings)
	}
	if err := noRuntime(env, name+"-"+name+"-r")(nil); err != nil {
		t.Fatal(err)
	}
}

// TestAccPlanWarningOnUpdate applies a runtime, a definition and an instance of it with the real
// terraform, then plans a new image: the definition's plan warns that the instance will roll.
func TestAccPlanWarningOnUpdate(t *testing.T) {
	env := testAccEnv(t)
	t.Parallel()
	name := randomName("acc-planu")
	w := newTFWork(t)
	w.write(instanceConfig(name, env.kubeconfig, "nginx:1.27", ""))
	w.run("init", "-input=false", "-backend=false")
	w.run("apply", "-auto-approve", "-input=false", "-lock=false")
	t.Cleanup(func() { w.run("destroy", "-auto-approve", "-input=false", "-lock=false") })

	w.write(instanceConfig(name, env.kubeconfig, "nginx:1.28", ""))
	warnings, took := w.planWarnings()
	t.Logf("terraform plan of an update with previews: %s", took.Round(time.Millisecond))
	want := fmt.Sprintf(`workload definition "%[1]s-def": the QleetOS controllers will do more than this change: `+
		`will roll workload_instance %[1]q (its workload_definition "%[1]s-def" changes (generation 1 → 2))`, name)
	if len(warnings) != 1 || warnings[0] != want {
		t.Fatalf("want one warning\n  %s\ngot %q", want, warnings)
	}
}

// TestPreviewUnreachable: an API that does not answer skips the preview, at once, and is not asked again.
func TestPreviewUnreachable(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1", client.WithToken("x"))
	if err != nil {
		t.Fatal(err)
	}
	ch := api.PlanChange{Op: api.PlanCreate, Kind: api.KindWorkloadDefinition, Name: "web"}
	start := time.Now()
	if res := previewChange(context.Background(), c, api.PlanRequest{Changes: []api.PlanChange{ch}}); res != nil {
		t.Fatalf("want no preview, got %+v", res)
	}
	if took := time.Since(start); took > previewTimeout {
		t.Fatalf("the preview took %s", took)
	}
	if _, off := previewUnavailable.Load(c); !off {
		t.Fatal("want the client remembered as unavailable")
	}
}

// TestKnownForPreview: unknown references become "unknown:<path>", other unknown values null (the API's
// default), and computed attributes stay unknown.
func TestKnownForPreview(t *testing.T) {
	list := tftypes.List{ElementType: tftypes.String}
	status := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"phase": tftypes.String}}
	typ := tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"definition_id": tftypes.String, "namespace": tftypes.String, "replicas": tftypes.Number,
		"instance_ids": list, "databases": list, "status": status,
	}}
	unknown := func(t tftypes.Type) tftypes.Value { return tftypes.NewValue(t, tftypes.UnknownValue) }
	in := tftypes.NewValue(typ, map[string]tftypes.Value{
		"definition_id": unknown(tftypes.String), "namespace": unknown(tftypes.String), "replicas": unknown(tftypes.Number),
		"instance_ids": tftypes.NewValue(list, []tftypes.Value{unknown(tftypes.String), tftypes.NewValue(tftypes.String, "i-1")}),
		"databases":    unknown(list), "status": unknown(status),
	})
	got, err := knownForPreview(in)
	if err != nil {
		t.Fatal(err)
	}
	want := tftypes.NewValue(typ, map[string]tftypes.Value{
		"definition_id": tftypes.NewValue(tftypes.String, api.PlanUnknownPrefix+"definition_id"), "namespace": tftypes.NewValue(tftypes.String, nil),
		"replicas":     tftypes.NewValue(tftypes.Number, nil),
		"instance_ids": tftypes.NewValue(list, []tftypes.Value{tftypes.NewValue(tftypes.String, api.PlanUnknownPrefix+"instance_ids[0]"), tftypes.NewValue(tftypes.String, "i-1")}),
		"databases":    tftypes.NewValue(list, nil), "status": unknown(status),
	})
	if !got.Equal(want) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}
