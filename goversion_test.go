package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestGoVersionAgrees keeps the Go version the same everywhere a new user reads it: the go directive of
// go.mod is the version the build needs, so every "Go 1.NN" in the README, CONTRIBUTING.md and the
// scripts must name it, and the go directive of each tools/*/go.mod (built with the same Go) must not
// ask for a later one.
func TestGoVersionAgrees(t *testing.T) {
	directive := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)(\.\d+)?\s*$`)
	goMod := func(path string) (major, minor int) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := directive.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no go directive", path)
		}
		major, _ = strconv.Atoi(string(m[1]))
		minor, _ = strconv.Atoi(string(m[2]))
		return major, minor
	}
	major, minor := goMod("go.mod")
	want := strconv.Itoa(major) + "." + strconv.Itoa(minor)

	tools, err := filepath.Glob("tools/*/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tools {
		if ma, mi := goMod(p); ma > major || (ma == major && mi > minor) {
			t.Errorf("%s: go %d.%d is later than go.mod's go %s, the version the README asks for", p, ma, mi, want)
		}
	}

	scripts, err := filepath.Glob("scripts/*.sh")
	if err != nil {
		t.Fatal(err)
	}
	mention := regexp.MustCompile(`\bGo (\d+\.\d+)`)
	found := 0
	for _, p := range append([]string{"README.md", "CONTRIBUTING.md"}, scripts...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mention.FindAllStringSubmatch(line, -1) {
				found++
				if m[1] != want {
					t.Errorf("%s:%d: says Go %s, but go.mod needs go %s: %s", p, i+1, m[1], want, strings.TrimSpace(line))
				}
			}
		}
	}
	if found == 0 {
		t.Error("neither the README, CONTRIBUTING.md nor the scripts name a Go version: the README must say which Go to install")
	}
}

// TestKubesimSharesModuleVersions keeps every module that both the qleet build and kubesim compile at
// one version in go.mod and tools/kubesim/go.mod. A package's build cache entry depends on the versions
// of everything it imports, so one differing module below client-go (x/net, protobuf) makes a cold
// `make demo` compile client-go, apimachinery and the Kubernetes API types twice.
func TestKubesimSharesModuleVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over both builds")
	}
	modules := func(dir string, pkgs ...string) map[string]string {
		t.Helper()
		args := append([]string{"list", "-deps", "-f",
			`{{if not .Standard}}{{with .Module}}{{.Path}} {{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}`}, pkgs...)
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		mods := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			if path, version, ok := strings.Cut(line, " "); ok && version != "" {
				mods[path] = version
			}
		}
		return mods
	}
	root := modules(".", "./controlplane/cmd/qleet", ".")
	kubesim := modules("tools/kubesim", ".")
	shared := 0
	for path, v := range root {
		kv, ok := kubesim[path]
		if !ok {
			continue
		}
		shared++
		if kv != v {
			t.Errorf("%s: %s in go.mod, %s in tools/kubesim/go.mod: both builds compile it, so its packages and everything above them build twice; align them (go get %s@<the later one> in the other module)", path, v, kv, path)
		}
	}
	if shared < 20 {
		t.Fatalf("only %d modules in common: the go list output was not understood", shared)
	}
}
