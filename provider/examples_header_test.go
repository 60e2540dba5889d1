package provider

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// An example's header (the first comment block of examples/<name>/main.tf) gives the shell commands that
// run it, from the repository root, in the setup docs/guides/local-development.md describes: the
// provider installed by `make install-provider` into Terraform's implicit local mirror, and no
// dev_overrides. These tests keep the headers true.

// headerCommands returns the shell commands of a header: the lines of the file's first comment block
// indented by three spaces or more after the '#', without a trailing "  # comment".
func headerCommands(t *testing.T, mainTF string) []string {
	t.Helper()
	src, err := os.ReadFile(mainTF)
	if err != nil {
		t.Fatal(err)
	}
	trailing := regexp.MustCompile(`\s{2,}#.*$`)
	var cmds []string
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		if rest, ok := strings.CutPrefix(line, "#   "); ok && strings.TrimSpace(rest) != "" {
			cmds = append(cmds, strings.TrimSpace(trailing.ReplaceAllString(rest, "")))
		}
	}
	return cmds
}

// exampleDirs returns the names of the examples with a main.tf, and the repository root.
func exampleDirs(t *testing.T) (root string, names []string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "examples", "*", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		names = append(names, filepath.Base(filepath.Dir(f)))
	}
	if len(names) == 0 {
		t.Fatalf("no examples/*/main.tf under %s", root)
	}
	return root, names
}

// initLine returns the header's command that runs terraform init, checking that it first changes into
// the example's own directory (the header's commands run from the repository root).
func initLine(t *testing.T, name string, cmds []string) string {
	t.Helper()
	for _, c := range cmds {
		if strings.Contains(c, "terraform init") {
			if !strings.HasPrefix(c, "cd examples/"+name+" && ") {
				t.Errorf("examples/%s: %q must start with `cd examples/%s && ` (the header runs from the repository root)", name, c, name)
			}
			return c
		}
	}
	t.Fatalf("examples/%s: the header has no `terraform init` command; it has %q", name, cmds)
	return ""
}

// TestExampleHeadersSayHowToRun checks each header without running terraform: it builds the provider
// with `make install-provider` (a real target of GNUmakefile, which runs scripts/install-provider.sh),
// uses no dev_overrides, names make targets and repository paths that exist, and runs terraform init
// in the example's directory.
func TestExampleHeadersSayHowToRun(t *testing.T) {
	root, names := exampleDirs(t)
	mk, err := os.ReadFile(filepath.Join(root, "GNUmakefile"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^install-provider:.*\n\t.*scripts/install-provider\.sh`)
	if !recipe.Match(mk) {
		t.Fatal("GNUmakefile: the install-provider target must run scripts/install-provider.sh (the script these tests run)")
	}
	pathTok := regexp.MustCompile(`^(charts|examples|scripts|docs|deploy)/[^$]*$`)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			cmds := headerCommands(t, filepath.Join(root, "examples", name, "main.tf"))
			initLine(t, name, cmds)
			installs := false
			for _, c := range cmds {
				if strings.Contains(c, "dev_overrides") || strings.Contains(c, "TF_CLI_CONFIG_FILE") {
					t.Errorf("examples/%s: %q: the header's setup has no dev_overrides and no CLI config", name, c)
				}
				fields := strings.Fields(c)
				if len(fields) > 1 && fields[0] == "make" {
					for _, target := range fields[1:] {
						if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(mk) {
							t.Errorf("examples/%s: %q: GNUmakefile has no target %q", name, c, target)
						}
						installs = installs || target == "install-provider"
					}
				}
				for _, f := range fields {
					if pathTok.MatchString(f) {
						if _, err := os.Stat(filepath.Join(root, f)); err != nil {
							t.Errorf("examples/%s: %q names %s, which is not in the repository: %v", name, c, f, err)
						}
					}
				}
			}
			if !installs {
				t.Errorf("examples/%s: the header must install the provider with `make install-provider`; it has %q", name, cmds)
			}
		})
	}
}

// TestAccExampleHeadersInit runs each header's terraform command line with the real terraform, after
// scripts/install-provider.sh (what `make install-provider` runs) has installed the provider into the
// implicit mirror of a temporary HOME, with no TF_* variable set: no dev_overrides, no CLI config. The
// line runs as written from a copy of the repository's layout, except that `terraform apply` becomes
// `terraform validate`: apply needs a running qleet server with its clusters (TestAccSeedsExample applies
// the seeds example end to end), while init must succeed here exactly as a new user types it.
func TestAccExampleHeadersInit(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1")
	}
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		t.Skip("needs TF_ACC_TERRAFORM_PATH (the real terraform binary)")
	}
	tf, err := filepath.Abs(tf)
	if err != nil {
		t.Fatal(err)
	}
	root, names := exampleDirs(t)
	home, pathDir := t.TempDir(), t.TempDir()
	if err := os.Symlink(tf, filepath.Join(pathDir, "terraform")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The environment of a new user's shell: a fresh HOME, terraform on PATH, no TF_* variable. Go keeps
	// its own caches (they default to paths under HOME), so the build reuses them.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TF_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "PATH="+pathDir+string(os.PathListSeparator)+os.Getenv("PATH"), "CHECKPOINT_DISABLE=1")
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.CommandContext(ctx, "go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}

	install := exec.CommandContext(ctx, filepath.Join(root, "scripts", "install-provider.sh"))
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("scripts/install-provider.sh: %v\n%s", err, out)
	}
	installed, err := filepath.Glob(filepath.Join(home, ".terraform.d", "plugins", "registry.terraform.io", "qleetos", "qleet", "*", "*", "terraform-provider-qleet_v*"))
	if err != nil || len(installed) != 1 {
		t.Fatalf("install-provider.sh: want one provider in ~/.terraform.d/plugins, found %q (%v)", installed, err)
	}
	version := strings.TrimPrefix(filepath.Base(installed[0]), "terraform-provider-qleet_v")

	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			line := initLine(t, name, headerCommands(t, filepath.Join(root, "examples", name, "main.tf")))
			parts := strings.Split(line, "&&")
			for i, p := range parts {
				if f := strings.Fields(p); len(f) > 1 && f[0] == "terraform" && f[1] == "apply" {
					parts[i] = " terraform validate -no-color "
				}
			}
			script := strings.Join(parts, "&&")

			work := t.TempDir()
			dst := filepath.Join(work, "examples", name)
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			tfs, err := filepath.Glob(filepath.Join(root, "examples", name, "*.tf"))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tfs {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.CommandContext(ctx, "bash", "-ec", script)
			cmd.Dir, cmd.Env = work, env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("examples/%s: `%s` failed: %v\n%s", name, script, err, out.String())
			}
			for _, want := range []string{
				"Installed qleetos/qleet v" + version, // from the mirror install-provider.sh wrote
				"has been successfully initialized!",  // "Terraform has", or "OpenTofu has" under make test-tofu
				"The configuration is valid.",
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("examples/%s: `%s`: output lacks %q:\n%s", name, script, want, out.String())
				}
			}
			if strings.Contains(out.String(), "dev_overrides") {
				t.Errorf("examples/%s: `%s` ran with dev_overrides:\n%s", name, script, out.String())
			}
		})
	}
}
