package client_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxClientModules is the client's dependency budget: how many modules outside the standard library a
// program that imports only the client pays for. Raise it only with a reason; it was 32 (122 packages)
// when the client still held the kind validation that used client-go and apimachinery.
const maxClientModules = 7

// TestClientDependencyBudget keeps the Go client light: a program that only calls the API (this package,
// and the wire types, registry and validation in package api under it) must not pull in Kubernetes
// (client-go, apimachinery) or the controllers, and the number of modules it needs stays within the budget.
func TestClientDependencyBudget(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}{{end}}", ".", "../api").CombinedOutput()
	require.NoError(t, err, string(out))
	modules := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, mod, _ := strings.Cut(line, " ")
		require.False(t, strings.HasPrefix(pkg, "k8s.io/"), "the client must not import Kubernetes: %s", pkg)
		require.NotContains(t, pkg, "/controlplane/", "the client must not import the control plane: %s", pkg)
		if mod != "" && mod != "github.com/qleetos/terraform-provider-qleet" {
			modules[mod] = true
		}
	}
	require.LessOrEqual(t, len(modules), maxClientModules, "modules the client pulls in: %v", modules)
}
