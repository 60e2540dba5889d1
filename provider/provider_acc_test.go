package provider

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// Acceptance tests run real terraform against the provider served in-process, a whole control plane
// started in-process (SQLite, embedded NATS, controllers), and one kubesim cluster used as a kubeconfig
// runtime. The control plane and the cluster are started once per test binary, on first use, and stopped
// in TestMain.

// testProviders serves the provider in-process to terraform.
var testProviders = map[string]func() (tfprotov6.ProviderServer, error){
	"qleet": providerserver.NewProtocol6WithError(New("test")()),
}

// accEnv is the shared acceptance test environment.
type accEnv struct {
	// api is an admin client of the control plane.
	api *client.Client
	// kubeconfig is the path of the kubesim cluster's admin kubeconfig.
	kubeconfig string
	// kube talks to the kubesim cluster.
	kube kubernetes.Interface
	// dir holds the environment's files.
	dir string
}

var acc struct {
	once  sync.Once
	env   *accEnv
	err   error
	stops []func()
	log   string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code != 0 && acc.log != "" {
		fmt.Fprintf(os.Stderr, "control plane log (last lines of %s):\n%s\n", acc.log, tail(acc.log, 80))
	}
	for i := len(acc.stops) - 1; i >= 0; i-- {
		acc.stops[i]()
	}
	os.Exit(code)
}

// testAccEnv returns the shared environment, starting it on first use. It skips without TF_ACC.
func testAccEnv(t *testing.T) *accEnv {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 (and TF_ACC_TERRAFORM_PATH), or run `make testacc`")
	}
	acc.once.Do(func() { acc.env, acc.err = startAccEnv() })
	if acc.err != nil {
		t.Fatalf("acceptance environment: %v", acc.err)
	}
	return acc.env
}

func startAccEnv() (*accEnv, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubesimtest.StartTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "qleet-provider-acc-")
	if err != nil {
		return nil, err
	}
	acc.stops = append(acc.stops, func() { _ = os.RemoveAll(dir) })
	env := &accEnv{dir: dir}

	bin, err := kubesimtest.Binary(ctx)
	if err != nil {
		return nil, fmt.Errorf("kubesim binary: %w", err)
	}
	cluster, err := kubesim.Start(ctx, kubesim.Config{Binary: bin, DataDir: filepath.Join(dir, "kubesim"), Name: "acc", Nodes: 2})
	if err != nil {
		return nil, fmt.Errorf("start kubesim: %w", err)
	}
	acc.stops = append(acc.stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cluster.Stop(sctx)
	})
	env.kubeconfig = cluster.Kubeconfig
	rc, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubesim kubeconfig: %w", err)
	}
	if env.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}

	acc.log = filepath.Join(dir, "controlplane.log")
	logf, err := os.Create(acc.log)
	if err != nil {
		return nil, err
	}
	a, err := app.Start(ctx, app.Config{
		DataDir: filepath.Join(dir, "qleet"), Listen: "127.0.0.1:0", API: true, Controllers: true,
		ResyncInterval: 2 * time.Second, KubesimBinary: bin, CleanupGrace: 3 * time.Second,
		SupportChartDir: cptest.SupportCharts(), OwnerGrace: 5 * time.Second, AWSPoll: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	acc.stops = append(acc.stops, func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		a.Close(cctx)
		_ = logf.Close()
	})
	if env.api, err = a.Client(); err != nil {
		return nil, err
	}
	// The provider under test reads these, as a user's would.
	for k, v := range map[string]string{EnvEndpoint: a.Endpoint, EnvToken: a.AdminToken, "CHECKPOINT_DISABLE": "1"} {
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// randomName returns a DNS-1123 name unique to a test run.
func randomName(prefix string) string {
	return prefix + "-" + strings.ToLower(acctest.RandStringFromCharSet(6, acctest.CharSetAlphaNum))
}

// hclString quotes s for HCL (a heredoc-free string, with ${ and %{ escaped).
func hclString(s string) string {
	q := fmt.Sprintf("%q", s)
	q = strings.ReplaceAll(q, "${", "$${")
	return strings.ReplaceAll(q, "%{", "%%{")
}

// deadKubeconfig writes a copy of the kubesim kubeconfig whose server is an address where nothing
// listens, and returns its path.
func (e *accEnv) deadKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(e.kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://127.0.0.1:1"
	}
	p := filepath.Join(t.TempDir(), "dead.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return p
}

// checkDestroyed verifies that every qleet object in the state is gone from the API.
func (e *accEnv) checkDestroyed(s *terraform.State) error {
	ctx := context.Background()
	for addr, rs := range s.RootModule().Resources {
		kind, ok := strings.CutPrefix(rs.Type, "qleet_")
		if !ok || strings.HasPrefix(addr, "data.") {
			continue
		}
		_, err := e.api.Raw(kind).Get(ctx, rs.Primary.ID)
		if err == nil {
			return fmt.Errorf("%s (%s) still exists after destroy", addr, rs.Primary.ID)
		}
		if !api.IsNotFound(err) {
			return fmt.Errorf("%s: %w", addr, err)
		}
	}
	return nil
}

// emptyPlanAfterApply asserts, beyond the framework's own check, that a plan after apply and refresh
// is empty.
var emptyPlanAfterApply = resource.ConfigPlanChecks{
	PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func TestAccProviderConfiguration(t *testing.T) {
	testAccEnv(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				Config: `
provider "qleet" {
  token = "not-a-token"
}
data "qleet_kubernetes_runtimes" "all" {}
`,
				ExpectError: regexp.MustCompile(`rejected the token \(unauthorized\)`),
			},
			{
				Config: `
provider "qleet" {
  endpoint = "http://127.0.0.1:1"
}
data "qleet_kubernetes_runtimes" "all" {}
`,
				ExpectError: regexp.MustCompile(`(?s)not reachable:.*connection\s+refused`),
			},
			{
				Config: `
provider "qleet" {
  endpoint = "ftp://example.com"
}
data "qleet_kubernetes_runtimes" "all" {}
`,
				ExpectError: regexp.MustCompile(`must be an absolute http or https URL`),
			},
			{
				Config: `
resource "terraform_data" "endpoint" {
  input = "http://127.0.0.1:1"
}
provider "qleet" {
  endpoint = terraform_data.endpoint.output
}
data "qleet_kubernetes_runtimes" "all" {}
`,
				ExpectError: regexp.MustCompile(`Unknown QleetOS provider endpoint`),
			},
			{
				// The environment (QLEET_ENDPOINT, QLEET_TOKEN) configures the provider.
				Config: `data "qleet_kubernetes_runtimes" "none" { label_selector = "no-such-label=x" }`,
				Check:  resource.TestCheckResourceAttr("data.qleet_kubernetes_runtimes.none", "items.#", "0"),
			},
		},
	})
}
