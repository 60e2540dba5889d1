// Package controlplane_test holds checks that span the control plane's packages.
package controlplane_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/qleetos/terraform-provider-qleet/"

// TestLayering keeps the layout of DESIGN.md: pure decisions sit below both the API server and the
// controllers, so the server imports no controller package, and no controller package imports another
// (a controller that needs another's work writes it to the API). Only the wiring (app) and the binary
// put controllers together. Test files are not counted.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, module+"...").CombinedOutput()
	require.NoError(t, err, string(out))
	const controllers = module + "controlplane/controllers/"
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		for _, imp := range strings.Fields(imports) {
			if !strings.HasPrefix(imp, controllers) {
				continue
			}
			checked++
			switch {
			case pkg == module+"controlplane/app":
				// The wiring starts every controller.
			case strings.HasPrefix(pkg, controllers):
				t.Errorf("controller package %s imports controller package %s: move the shared decision below both", pkg, imp)
			default:
				t.Errorf("%s imports controller package %s: only controlplane/app wires controllers", pkg, imp)
			}
		}
	}
	require.NotZero(t, checked, "the check saw no import of a controller package at all")
}
