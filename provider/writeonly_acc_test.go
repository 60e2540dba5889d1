package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

// terraformVersion returns the major and minor version of a terraform binary.
func terraformVersion(t *testing.T, bin string) (int, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version", "-json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s version -json: %v: %s", bin, err, out)
	}
	parts := strings.SplitN(v.Version, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("%s: version %q", bin, v.Version)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("%s: version %q: %v", bin, v.Version, err)
	}
	return major, minor
}

// writeOnlySupported tells whether a terraform binary has write-only attributes (1.11 and later).
func writeOnlySupported(t *testing.T, bin string) bool {
	major, minor := terraformVersion(t, bin)
	return major > 1 || major == 1 && minor >= 11
}

// controllerClient is a client with the controller role, the only one that reads write-only fields back.
func controllerClient(t *testing.T, env *accEnv) *client.Client {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(env.dir, "qleet", "controller.token"))
	if err != nil {
		t.Fatalf("controller token: %v", err)
	}
	c, err := client.New(os.Getenv(EnvEndpoint), client.WithToken(strings.TrimSpace(string(tok))))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kubeconfigSecrets are the credentials in a kubeconfig file, as they are written in it.
func kubeconfigSecrets(t *testing.T, path string) []string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range cfg.AuthInfos {
		if len(u.ClientKeyData) > 0 {
			out = append(out, base64.StdEncoding.EncodeToString(u.ClientKeyData))
		}
		if u.Token != "" {
			out = append(out, u.Token)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no credentials to look for", path)
	}
	return out
}

// writeOnlyConfig is a kubeconfig runtime, an instance on it, a secret for the instance and a cloud
// account, each with its secret in a write-only attribute. The secrets come as a user's would: from a
// file, and from ephemeral variables (TF_VAR_api_token, TF_VAR_aws_secret_key), which Terraform keeps
// out of saved plans. A literal would be part of the configuration, which `terraform show -json` prints.
func writeOnlyConfig(name, kubeconfigPath string, kubeVersion, valueVersion int, acct awssim.Account, awsURL string) string {
	return fmt.Sprintf(`
variable "api_token" {
  type      = string
  ephemeral = true
  sensitive = true
}

variable "aws_secret_key" {
  type      = string
  ephemeral = true
  sensitive = true
}

resource "qleet_kubernetes_runtime" "rt" {
  name                  = "%[1]s-rt"
  provider_type         = "kubeconfig"
  kubeconfig_wo         = file(%[2]s)
  kubeconfig_wo_version = %[3]d
}

resource "qleet_workload_definition" "app" {
  name       = "%[1]s-app"
  containers = [{ name = "web", image = "nginx:1.27" }]
}

resource "qleet_workload_instance" "app" {
  name          = "%[1]s-app"
  definition_id = qleet_workload_definition.app.id
  runtime_id    = qleet_kubernetes_runtime.rt.id
}

resource "qleet_secret" "api" {
  name              = "%[1]s-api"
  instance_ids      = [qleet_workload_instance.app.id]
  values_wo         = { API_TOKEN = var.api_token }
  values_wo_version = %[4]d
}

resource "qleet_cloud_account" "aws" {
  name                         = "%[1]s-aws"
  provider_type                = "aws"
  region                       = "us-east-1"
  access_key_id                = %[5]q
  secret_access_key_wo         = var.aws_secret_key
  secret_access_key_wo_version = 1
  endpoint                     = %[6]q
}
`, name, hclString(kubeconfigPath), kubeVersion, valueVersion, acct.AccessKeyID, awsURL)
}

// exitCode runs terraform and returns its exit code (failing the test when it cannot start).
func (w *tfWork) exitCode(args ...string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.bin, args...)
	cmd.Dir, cmd.Env = w.dir, w.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		w.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return 0, string(out)
}

// noneOf fails the test when any of the secrets is in what.
func noneOf(t *testing.T, where string, what []byte, secrets ...string) {
	t.Helper()
	if len(what) == 0 {
		t.Fatalf("%s is empty", where)
	}
	for _, s := range secrets {
		if n := strings.Count(string(what), s); n > 0 {
			t.Fatalf("%s holds a write-only value %d times (%.12s...)", where, n, s)
		}
	}
}

// TestAccWriteOnlyKeepsSecretsOutOfPlanAndState applies, with the real terraform (1.11 or later), a
// runtime whose kubeconfig, a secret whose values, and a cloud account whose secret key are given in
// write-only attributes. Neither the state file nor the saved plan holds any of them; the controllers
// received them (the instance's Kubernetes Secret holds the value, the runtime is connected, STS
// accepted the key); a changed value alone plans nothing, and a changed version delivers it.
func TestAccWriteOnlyKeepsSecretsOutOfPlanAndState(t *testing.T) {
	env := testAccEnv(t)
	w := newTFWork(t)
	if !writeOnlySupported(t, w.bin) {
		major, minor := terraformVersion(t, w.bin)
		t.Skipf("write-only attributes need Terraform 1.11 or later; %s is %d.%d", w.bin, major, minor)
	}
	t.Parallel()
	ctx := context.Background()
	name := randomName("acc-wo")
	ctrl := controllerClient(t, env)

	sim := awssim.New(awssim.Config{})
	if err := sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Stop(context.Background()) })
	acct, err := sim.AddAccount("")
	if err != nil {
		t.Fatal(err)
	}

	// Two versions of the kubeconfig: the cluster's own, each with a marker line of its own.
	base, err := os.ReadFile(env.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kubeMarker := func(v int) string { return fmt.Sprintf("kube-marker-%s-v%d", name, v) }
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig := func(v int) {
		if err := os.WriteFile(kubeconfigPath, append(append([]byte{}, base...), "\n# "+kubeMarker(v)+"\n"...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	valueMarker := func(v int) string { return fmt.Sprintf("value-marker-%s-v%d", name, v) }
	secrets := append(kubeconfigSecrets(t, env.kubeconfig), acct.SecretAccessKey, kubeMarker(1), kubeMarker(2), valueMarker(1), valueMarker(2))

	baseEnv := w.env
	vars := func(value string) {
		w.env = append(append([]string{}, baseEnv...), "TF_VAR_api_token="+value, "TF_VAR_aws_secret_key="+acct.SecretAccessKey)
	}

	apply := func(step string) {
		start := time.Now()
		w.run("apply", "-auto-approve", "-input=false", "-lock=false")
		t.Logf("%s: terraform apply: %s", step, time.Since(start).Round(time.Millisecond))
	}
	stateHasNone := func(step string) {
		t.Helper()
		state, err := os.ReadFile(filepath.Join(w.dir, "terraform.tfstate"))
		if err != nil {
			t.Fatal(err)
		}
		noneOf(t, step+": terraform.tfstate", state, secrets...)
		for _, want := range []string{`"values_wo_version"`, `"kubeconfig_wo_version"`, `"secret_access_key_wo_version"`} {
			if !strings.Contains(string(state), want) {
				t.Fatalf("%s: the state has no %s", step, want)
			}
		}
	}
	secretHolds := func(want string) {
		t.Helper()
		err := await.Until(ctx, time.Minute, func(ctx context.Context) error {
			s, err := env.kube.CoreV1().Secrets(name+"-app").Get(ctx, "qleet-secret-"+name+"-api", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := string(s.Data["API_TOKEN"]); got != want {
				return fmt.Errorf("the instance's Secret holds %q, want %q", got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// runtimeHolds checks, through the API with the controller role, that the runtime's kubeconfig is
	// the one of the given version, and that the runtime is reconciled with it.
	runtimeHolds := func(v int) int64 {
		t.Helper()
		var gen int64
		err := await.Until(ctx, time.Minute, func(ctx context.Context) error {
			rt, err := ctrl.KubernetesRuntimes().GetByName(ctx, name+"-rt")
			if err != nil {
				return err
			}
			if !strings.Contains(rt.Spec.Kubeconfig, "# "+kubeMarker(v)) {
				return fmt.Errorf("the runtime's kubeconfig is not version %d", v)
			}
			st := client.CommonStatus(rt)
			if st.Phase != api.PhaseReady || st.ObservedGeneration != rt.Generation {
				return fmt.Errorf("runtime %s at generation %d of %d", st.Phase, st.ObservedGeneration, rt.Generation)
			}
			gen = rt.Generation
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return gen
	}

	// Version 1 of everything.
	writeKubeconfig(1)
	vars(valueMarker(1))
	w.write(writeOnlyConfig(name, kubeconfigPath, 1, 1, acct, sim.URL()))
	w.run("init", "-input=false")
	w.run("plan", "-input=false", "-lock=false", "-out=v1.tfplan")
	noneOf(t, "the saved plan of version 1", w.run("show", "-json", "v1.tfplan"), secrets...)
	apply("version 1")
	t.Cleanup(func() { w.run("destroy", "-auto-approve", "-input=false", "-lock=false") })
	stateHasNone("version 1")
	secretHolds(valueMarker(1))
	gen1 := runtimeHolds(1)
	secret, err := ctrl.Secrets().GetByName(ctx, name+"-api")
	if err != nil {
		t.Fatal(err)
	}
	if secret.Spec.Values["API_TOKEN"] != valueMarker(1) {
		t.Fatalf("the API holds the secret value %q", secret.Spec.Values["API_TOKEN"])
	}
	secretGen1 := secret.Generation
	account, err := ctrl.CloudAccounts().GetByName(ctx, name+"-aws")
	if err != nil {
		t.Fatal(err)
	}
	if account.Spec.SecretAccessKey != acct.SecretAccessKey || account.Status.AccountID != acct.ID {
		t.Fatalf("the cloud account: key received %t, account id %q (want %q, which STS gives only to a signature made with the key)",
			account.Spec.SecretAccessKey == acct.SecretAccessKey, account.Status.AccountID, acct.ID)
	}

	// New values, the same versions: Terraform does not see them, and plans nothing.
	writeKubeconfig(2)
	vars(valueMarker(2))
	w.write(writeOnlyConfig(name, kubeconfigPath, 1, 1, acct, sim.URL()))
	if code, out := w.exitCode("plan", "-detailed-exitcode", "-input=false", "-lock=false"); code != 0 {
		t.Fatalf("a new write-only value without a new version: want an empty plan (exit 0), got exit %d\n%s", code, out)
	}

	// New versions: the plan updates the runtime and the secret, and the apply delivers the new values.
	w.write(writeOnlyConfig(name, kubeconfigPath, 2, 2, acct, sim.URL()))
	if code, out := w.exitCode("plan", "-detailed-exitcode", "-input=false", "-lock=false", "-out=v2.tfplan"); code != 2 {
		t.Fatalf("new versions: want a plan with changes (exit 2), got exit %d\n%s", code, out)
	}
	shown := w.run("show", "-json", "v2.tfplan")
	noneOf(t, "the saved plan of version 2", shown, secrets...)
	for _, want := range []string{`"values_wo_version":2`, `"kubeconfig_wo_version":2`} {
		if !strings.Contains(string(shown), want) {
			t.Fatalf("the saved plan does not change %s", want)
		}
	}
	start := time.Now()
	w.run("apply", "-input=false", "-lock=false", "v2.tfplan")
	t.Logf("version 2: terraform apply of the saved plan: %s", time.Since(start).Round(time.Millisecond))
	stateHasNone("version 2")
	secretHolds(valueMarker(2))
	if gen2 := runtimeHolds(2); gen2 <= gen1 {
		t.Fatalf("the runtime's generation %d did not grow from %d", gen2, gen1)
	}
	if secret, err = ctrl.Secrets().GetByName(ctx, name+"-api"); err != nil {
		t.Fatal(err)
	}
	if secret.Generation <= secretGen1 {
		t.Fatalf("the secret's generation %d did not grow from %d", secret.Generation, secretGen1)
	}

	// After the apply and a refresh, nothing changes; and what a token without the controller role
	// reads back (the data sources) holds no write-only value either.
	if code, out := w.exitCode("plan", "-detailed-exitcode", "-input=false", "-lock=false"); code != 0 {
		t.Fatalf("after apply: want an empty plan (exit 0), got exit %d\n%s", code, out)
	}
	stateHasNone("after refresh")
}

// TestAccWriteOnlyConfigErrors: the plain and the write-only attribute together, or a write-only value
// without its version, fail validation with the real terraform, naming the attributes. On a terraform
// older than 1.11, a write-only attribute fails with the framework's error that names the version.
func TestAccWriteOnlyConfigErrors(t *testing.T) {
	testAccEnv(t)
	w := newTFWork(t)
	t.Parallel()
	validate := func(config string) string {
		w.write(config)
		code, out := w.exitCode("validate", "-no-color")
		if code == 0 {
			t.Fatalf("want validation to fail, it passed:\n%s", config)
		}
		return strings.Join(strings.Fields(out), " ")
	}
	w.write(``)
	w.run("init", "-input=false", "-backend=false")
	wo := `
resource "qleet_secret" "s" {
  name              = "s"
  instance_ids      = ["i"]
  values_wo         = { K = "v" }
  values_wo_version = 1
}`
	if !writeOnlySupported(t, w.bin) {
		out := validate(wo)
		if !regexp.MustCompile(`Write-only attributes are only supported in Terraform 1\.11 and later`).MatchString(out) {
			t.Fatalf("a write-only attribute on an older terraform: want the version named, got\n%s", out)
		}
		return
	}
	w.write(wo)
	if code, out := w.exitCode("validate", "-no-color"); code != 0 {
		t.Fatalf("values_wo with its version: want a valid configuration, got exit %d\n%s", code, out)
	}
	for config, want := range map[string]string{
		`resource "qleet_secret" "s" {
  name              = "s"
  instance_ids      = ["i"]
  values            = { K = "v" }
  values_wo         = { K = "v" }
  values_wo_version = 1
}`: `values and values_wo are the same value: set only one of them`,
		`resource "qleet_secret" "s" {
  name         = "s"
  instance_ids = ["i"]
  values_wo    = { K = "v" }
}`: `values_wo_version is required with values_wo`,
		`resource "qleet_kubernetes_runtime" "r" {
  name          = "r"
  provider_type = "kubeconfig"
}`: `kubeconfig is required for kubeconfig runtimes (or kubeconfig_wo`,
		`resource "qleet_cloud_account" "a" {
  name                         = "a"
  provider_type                = "aws"
  region                       = "us-east-1"
  secret_access_key            = "k"
  secret_access_key_wo         = "k"
  secret_access_key_wo_version = 1
}`: `secret_access_key and secret_access_key_wo are the same value`,
	} {
		if out := validate(config); !strings.Contains(out, want) {
			t.Fatalf("want %q in\n%s", want, out)
		}
	}
}
