package reconcile_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// wholeKindAllowed are the lists of a whole kind that reconciles still make, by file (under
// controlplane/controllers) and the kind's accessor, each with the reason it is not a reverse lookup.
// Keep it short: a new entry needs an index instead.
var wholeKindAllowed = map[string]string{
	"workload/placements.go KubernetesRuntimes": "placement chooses among the runtimes of its regions by spec or status region and labels: no index serves that yet; the kind counts clusters, not instances",
	"workload/placements.go RuntimeProfiles":    "placement's provisioning picks the profile that serves a region (a list in the profile's spec); the kind counts profiles",
	"dataservice/home.go KubernetesRuntimes":    "a data service's home choice by region, as placement's",
	"gateway/gateway.go DomainNames":            "a gateway's hosts are matched against the domain names' zones by suffix",
	"gateway/domain.go Gateways":                "a domain name's records come from the gateways whose hosts fall in its zone, by suffix",
	"gateway/route53.go CloudAccounts":          "records left in Route53 are looked for in every AWS cloud account",
}

// TestNoReconcileListsAWholeKind reads the controllers' code: every list a reconcile makes
// (client.Resource.All or List) carries a reference or a label filter, served by the store's indexes
// (Lookups), except the few named in wholeKindAllowed. A list whose options are not written out at the
// call counts as a whole kind. (The runtime's own resync passes list their kind by design; they are
// not reconciles.)
func TestNoReconcileListsAWholeKind(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "controllers")
	var found []string
	fset := token.NewFileSet()
	check := func(path, rel string) {
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "All" && sel.Sel.Name != "List") || len(call.Args) != 2 {
				return true
			}
			filtered, isOpts := listFilter(call.Args[1])
			switch {
			case isOpts && filtered:
				return true
			case !isOpts && (!isVar(call.Args[1]) || !onQleetClient(sel.X)):
				return true // not a QleetOS client list (client-go's, another All or List)
			}
			found = append(found, rel+" "+accessor(sel.X)+" ("+fset.Position(call.Pos()).String()+")")
			return true
		})
	}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, err := filepath.Rel(root, path)
		require.NoError(t, err)
		check(path, filepath.ToSlash(rel))
		return nil
	}))
	require.NotEmpty(t, found, "the check sees the allowed lists (else it reads nothing)")
	var unexpected []string
	for _, f := range found {
		key := f[:strings.Index(f, " (")]
		if _, ok := wholeKindAllowed[key]; !ok {
			unexpected = append(unexpected, f)
		}
	}
	slices.Sort(unexpected)
	require.Empty(t, unexpected, "reconciles list whole kinds: use reconcile.Lookups (a reference or label filter, served by the store's indexes)")
}

// listFilter says whether e is a client.ListOptions literal, and whether it sets a non-empty References
// or LabelSelector.
func listFilter(e ast.Expr) (filtered, isOpts bool) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok || !namesListOptions(lit.Type) {
		return false, false
	}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, _ := kv.Key.(*ast.Ident)
		if key == nil || (key.Name != "References" && key.Name != "LabelSelector") {
			continue
		}
		if b, ok := kv.Value.(*ast.BasicLit); ok && (b.Value == `""` || b.Value == "``") {
			continue
		}
		return true, true
	}
	return false, true
}

// namesListOptions says whether e is the type client.ListOptions.
func namesListOptions(e ast.Expr) bool {
	x, ok := e.(*ast.SelectorExpr)
	return ok && x.Sel.Name == "ListOptions" && isIdent(x.X) && x.X.(*ast.Ident).Name == "client"
}

// isVar says whether e is a variable or a field (options not written out at the call: not trusted).
func isVar(e ast.Expr) bool {
	switch e.(type) {
	case *ast.Ident, *ast.SelectorExpr:
		return true
	}
	return false
}

// onQleetClient says whether a list's receiver is a resource of the QleetOS client: a call of an
// accessor on something named Client or cl (r.Client.Secrets(), cl.WorkloadInstances()).
func onQleetClient(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	s, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch x := s.X.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name == "Client"
	case *ast.Ident:
		return x.Name == "cl" || x.Name == "c"
	}
	return false
}

func isIdent(e ast.Expr) bool {
	_, ok := e.(*ast.Ident)
	return ok
}

// accessor names the resource a list is made on: r.Client.Secrets().All(...) gives "Secrets".
func accessor(e ast.Expr) string {
	if c, ok := e.(*ast.CallExpr); ok {
		if s, ok := c.Fun.(*ast.SelectorExpr); ok {
			return s.Sel.Name
		}
	}
	if s, ok := e.(*ast.SelectorExpr); ok {
		return s.Sel.Name
	}
	return "?"
}
