package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestQleetLeavesOutHelmsInstallMachinery keeps the packages that qleet does not run out of its build.
// It renders charts with Helm's loader and template engine (controlplane/render), not with Helm's
// action package and getters, which bring kubectl, cli-runtime and kustomize: about 200 packages of a
// cold `make demo` build.
func TestQleetLeavesOutHelmsInstallMachinery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the build")
	}
	out, err := exec.Command("go", "list", "-deps", "./controlplane/cmd/qleet", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 500 {
		t.Fatalf("only %d packages: the go list output was not understood", len(pkgs))
	}
	for _, p := range pkgs {
		for _, banned := range []string{"helm.sh/helm/v3/pkg/action", "helm.sh/helm/v3/pkg/getter", "k8s.io/kubectl/",
			"k8s.io/cli-runtime/", "sigs.k8s.io/kustomize/"} {
			if strings.HasPrefix(p, banned) {
				t.Errorf("qleet's build imports %s: find the import with `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./controlplane/cmd/qleet . | grep %s`", p, banned)
			}
		}
	}
}
