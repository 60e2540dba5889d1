package suite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/bench/report"
	"github.com/qleetos/terraform-provider-qleet/bench/stats"
)

// terraformParallelism is terraform's default -parallelism; the client-go comparison uses the same.
const terraformParallelism = 10

func (r *Runner) runTerraform(ctx context.Context) error {
	k, err := r.rig(ctx)
	if err != nil {
		return err
	}
	skip := ""
	switch {
	case k.instancesOK != "":
		skip = k.instancesOK
	case !isFile(r.cfg.Terraform):
		skip = "terraform not found at " + r.cfg.Terraform + " (make terraform)"
	case !isFile(filepath.Join(r.cfg.ProviderDir, "terraform-provider-qleet")):
		skip = "terraform-provider-qleet not found in " + r.cfg.ProviderDir + " (make build)"
	}
	if skip != "" {
		for _, n := range r.cfg.TerraformN {
			r.res.Terraform = append(r.res.Terraform, report.TerraformRow{N: n, Skipped: skip})
		}
		return nil
	}
	defer r.profileCPU(SectionTerraform)()

	rc := filepath.Join(r.cfg.WorkDir, "terraformrc")
	abs, _ := filepath.Abs(r.cfg.ProviderDir)
	if err := os.WriteFile(rc, fmt.Appendf(nil, "provider_installation {\n  dev_overrides {\n    \"qleetos/qleet\" = %q\n  }\n  direct {}\n}\n", abs), 0o600); err != nil {
		return err
	}
	for i, n := range r.cfg.TerraformN {
		row := report.TerraformRow{N: n}
		tfFirst := i%2 == 0
		for _, tfTurn := range []bool{tfFirst, !tfFirst} {
			if tfTurn {
				if err := r.terraformOnce(ctx, k, rc, n, &row); err != nil {
					row.Skipped = err.Error()
				}
				continue
			}
			names := make([]string, n)
			for j := range names {
				names[j] = fmt.Sprintf("cg%d-w%03d", n, j)
			}
			m := r.applyMethods(ctx, k)[0] // a: client-go server-side apply, watch Available
			r.log.Info("terraform comparison: client-go", "n", n)
			saved := r.cfg.ApplyConcurrency
			r.cfg.ApplyConcurrency = terraformParallelism
			_, wall, errs := r.applyBatch(ctx, m, names)
			r.cfg.ApplyConcurrency = saved
			row.ClientGoS = seconds(wall)
			if errs > 0 {
				r.note("terraform comparison N=%d: %d client-go workloads failed", n, errs)
			}
			m.cleanup(ctx, names, true)
		}
		row.Ratio = stats.Ratio(row.ApplyS, row.ClientGoS)
		r.res.Terraform = append(r.res.Terraform, row)
	}
	return nil
}

// terraformOnce applies n instances with terraform, plans again, and destroys them.
func (r *Runner) terraformOnce(ctx context.Context, k *kubeRig, rc string, n int, row *report.TerraformRow) error {
	dir := filepath.Join(r.cfg.WorkDir, fmt.Sprintf("tf-%d", n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeInstancesConfig(dir, "tf", k, r.cfg.Replicas, n); err != nil {
		return err
	}
	tf := func(args ...string) (time.Duration, int, error) {
		cmd := exec.CommandContext(ctx, r.cfg.Terraform, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1")
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if err != nil && (args[0] != "plan" || code != 2) {
			return d, code, fmt.Errorf("terraform %s: %w: %s", args[0], err, tail(string(out), 6))
		}
		return d, code, nil
	}
	r.log.Info("terraform apply", "n", n)
	d, _, err := tf("apply", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		return err
	}
	row.ApplyS = seconds(d)
	d, code, err := tf("plan", "-input=false", "-no-color", "-detailed-exitcode")
	if err != nil {
		return err
	}
	row.PlanS, row.PlanClean = seconds(d), code == 0
	d, _, err = tf("destroy", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		return err
	}
	row.DestroyS = seconds(d)
	names := make([]string, n)
	for j := range names {
		names[j] = fmt.Sprintf("tf%d-w%03d", n, j)
	}
	if err := k.waitNamespacesGone(ctx, names, 3*time.Minute); err != nil {
		r.log.Warn("terraform cleanup incomplete", "err", err)
	}
	return nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

func seconds(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// writeInstancesConfig writes dir/main.tf: the provider pointed at k's control plane, one definition named
// <prefix><n>-web and n instances of it (<prefix><n>-w000, ...) on k's runtime.
func writeInstancesConfig(dir, prefix string, k *kubeRig, replicas, n int) error {
	main := fmt.Sprintf(`terraform {
  required_providers {
    qleet = { source = "qleetos/qleet" }
  }
}

provider "qleet" {
  endpoint = %q
  token    = %q
}

resource "qleet_workload_definition" "web" {
  name       = "%s%d-web"
  containers = [{ name = "web", image = %q }]
  replicas   = %d
}

resource "qleet_workload_instance" "w" {
  count         = %d
  name          = format("%s%d-w%%03d", count.index)
  definition_id = qleet_workload_definition.web.id
  runtime_id    = %q
}
`, k.cp.app.Endpoint, k.cp.app.AdminToken, prefix, n, benchImage, replicas, n, prefix, n, k.runtime.ID)
	return os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o600)
}
