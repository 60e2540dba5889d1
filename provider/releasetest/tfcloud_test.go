// Package releasetest installs the provider the way a Terraform Cloud (HCP Terraform) run does: from a
// signed release served by a provider registry, with no dev_overrides and no CLI configuration, with
// the endpoint, token and CA certificate of the control plane in environment variables. It is what
// docs/guides/private-registry.md tells a user to do, step by step.
package releasetest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// releaseVersion is the version the test packs, as a tag v0.1.0 would.
const releaseVersion = "0.1.0"

// TestAccTerraformCloudPath packs the provider as .goreleaser.yml does (zip, manifest, SHA256SUMS, and
// its signature by a throwaway GPG key), serves it from a registry over HTTPS, and runs the real
// terraform (TF_ACC_TERRAFORM_PATH; OpenTofu works the same way) as a remote run would: an empty HOME,
// no CLI configuration, no TF_* variables, the registry's CA in SSL_CERT_FILE, and the control plane's
// endpoint, token and CA certificate in QLEET_ENDPOINT, QLEET_TOKEN and QLEET_CA_CERT. It runs init,
// apply, plan (which must be empty) and destroy of examples/quickstart, its source pointed at the
// registry, against a control plane served over TLS by a CA of its own, with kubesim clusters.
//
// First, an init from a namespace whose SHA256SUMS does not match its signature must fail: terraform
// checks the signature rather than trusting the registry.
func TestAccTerraformCloudPath(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 and TF_ACC_TERRAFORM_PATH")
	}
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		t.Skip("needs TF_ACC_TERRAFORM_PATH (the real terraform or tofu binary)")
	}
	tf, err := filepath.Abs(tf)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	start := time.Now()
	rel := packRelease(ctx, t, root, releaseVersion)
	t.Logf("packed and signed %s, %s, %s and %s (key %s) in %s", rel.ZipName, rel.ManifestName, rel.SumsName,
		rel.SigName, rel.KeyID, time.Since(start).Round(time.Second))
	reg := startRegistry(t, rel)

	// The control plane, over TLS with a certificate from a CA that only QLEET_CA_CERT names.
	bin, err := kubesimtest.Binary(ctx)
	if err != nil {
		t.Fatalf("kubesim binary: %v", err)
	}
	cpCA := newCA(t, "control plane test CA")
	certFile, keyFile := writePair(t, t.TempDir(), cpCA.issue(t, "localhost"))
	cp, admin := cptest.Start(t, app.Config{
		Listen: "127.0.0.1:0", TLSCertFile: certFile, TLSKeyFile: keyFile,
		KubesimBinary: bin, CleanupGrace: 3 * time.Second, OwnerGrace: 5 * time.Second,
	})
	if !strings.HasPrefix(cp.Endpoint, "https://") {
		t.Fatalf("the control plane serves %s, want https", cp.Endpoint)
	}

	// A remote run's environment: nothing from this machine's terraform setup.
	home := t.TempDir()
	env := []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + t.TempDir(),
		"TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"SSL_CERT_FILE=" + reg.CAFile,
		"QLEET_ENDPOINT=" + cp.Endpoint, "QLEET_TOKEN=" + cp.AdminToken, "QLEET_CA_CERT=" + string(cpCA.certPEM),
	}
	source := reg.Host + "/qleetos/qleet"
	work := quickstart(t, root, source)
	run := func(dir string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.CommandContext(ctx, tf, append(args, "-no-color")...)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		began := time.Now()
		err := cmd.Run()
		t.Logf("%s %s: %s", filepath.Base(tf), args[0], time.Since(began).Round(100*time.Millisecond))
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(work, args...)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", tf, strings.Join(args, " "), err, out)
		}
		return out
	}

	// A release whose SHA256SUMS does not match its signature is refused, and not installed.
	reg.tamper(t, "tampered")
	bad := quickstart(t, root, reg.Host+"/tampered/qleet")
	out, err := run(bad, "init", "-input=false")
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("init of a release with a tampered SHA256SUMS: want a failure, got %v:\n%s", err, out)
	}
	if line := lineWith(out, "signature"); line == "" {
		t.Errorf("init of a release with a tampered SHA256SUMS failed without naming the signature:\n%s", out)
	} else {
		t.Logf("tampered release: %s", line)
	}
	if _, err := os.Stat(installedBinary(bad, reg.Host, "tampered", rel)); err == nil {
		t.Errorf("init installed the tampered release")
	}

	// init installs the release from the registry and checks its signature.
	out = must("init", "-input=false")
	if want := "Installed " + source + " v" + releaseVersion; !strings.Contains(out, want) {
		t.Errorf("init: output lacks %q:\n%s", want, out)
	}
	if want := "key ID " + rel.KeyID; !strings.Contains(out, want) {
		t.Errorf("init: output lacks %q (the signature was not checked with the release key):\n%s", want, out)
	}
	t.Logf("init: %s", lineWith(out, "Installed "))
	if strings.Contains(out, "dev_overrides") || strings.Contains(out, "development overrides") {
		t.Errorf("init ran with dev_overrides:\n%s", out)
	}
	for _, p := range []string{"/files/qleetos/" + rel.SumsName, "/files/qleetos/" + rel.SigName, "/files/qleetos/" + rel.ZipName} {
		if len(reg.served(p)) == 0 {
			t.Errorf("init did not fetch %s from the registry (served: %q)", p, reg.served("/"))
		}
	}
	lock, err := os.ReadFile(filepath.Join(work, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"zh:` + rel.ZipSHA256 + `"`; !strings.Contains(string(lock), want) {
		t.Errorf(".terraform.lock.hcl lacks the release's zip checksum %s:\n%s", want, lock)
	}
	if _, err := os.Stat(installedBinary(work, reg.Host, "qleetos", rel)); err != nil {
		t.Fatalf("the release's binary is not where init installs it: %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// apply, with the provider configured from the environment only.
	must("apply", "-auto-approve", "-input=false")
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_, _ = run(work, "destroy", "-auto-approve", "-input=false")
		}
	})
	inst, err := admin.WorkloadInstances().GetByName(ctx, "hello")
	if err != nil {
		t.Fatalf("after apply: %v", err)
	}
	if len(inst.Status.Placements) != 2 {
		t.Fatalf("after apply: instance hello has placements %+v, want one in each of the quickstart's two regions", inst.Status.Placements)
	}
	for _, p := range inst.Status.Placements {
		if p.ReadyReplicas < 1 {
			t.Errorf("after apply: placement on %s (%s) has %d ready replicas", p.Runtime, p.Region, p.ReadyReplicas)
		}
	}

	// plan: nothing to change.
	if out, err := run(work, "plan", "-detailed-exitcode", "-input=false"); err != nil {
		t.Fatalf("plan after apply is not empty (exit %v):\n%s", err, out)
	}

	// destroy: every object of the configuration is gone.
	must("destroy", "-auto-approve", "-input=false")
	destroyed = true
	for kind, name := range map[string]string{
		api.KindRuntimeProfile: "default", api.KindWorkloadDefinition: "hello",
		api.KindWorkloadInstance: "hello", api.KindGateway: "hello",
	} {
		if _, err := admin.Raw(kind).GetByName(ctx, name); !api.IsNotFound(err) {
			t.Errorf("after destroy: %s %q: want not found, got %v", kind, name, err)
		}
	}

}

// installedBinary is where init, in dir, installs the provider binary of rel from host/ns/qleet.
func installedBinary(dir, host, ns string, rel *release) string {
	return filepath.Join(dir, ".terraform", "providers", host, ns, "qleet", rel.Version, rel.OS+"_"+rel.Arch,
		"terraform-provider-qleet_v"+rel.Version)
}

// lineWith returns the first line of out that contains sub (case-insensitively), trimmed, or "".
func lineWith(out, sub string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(strings.ToLower(l), strings.ToLower(sub)) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// quickstart copies examples/quickstart/main.tf into a new directory, with its provider source set to
// source: the one change a user makes to use a private registry.
func quickstart(t *testing.T, root, source string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	const from = `source = "qleetos/qleet"`
	if strings.Count(string(src), from) != 1 {
		t.Fatalf("examples/quickstart/main.tf: want one %s", from)
	}
	dir := t.TempDir()
	cfg := strings.Replace(string(src), from, `source = "`+source+`"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
