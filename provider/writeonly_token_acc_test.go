package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAccWriteOnlyEphemeralToken runs the real terraform (1.11 or later) with the ephemeral qleet_token:
// a viewer token configures a second qleet provider, which reads through it and is refused a write.
// After the run the token is revoked (no token of that name is left), and neither the state nor the
// saved plan holds it.
func TestAccWriteOnlyEphemeralToken(t *testing.T) {
	env := testAccEnv(t)
	w := newTFWork(t)
	if !writeOnlySupported(t, w.bin) {
		major, minor := terraformVersion(t, w.bin)
		t.Skipf("the ephemeral token is tested with Terraform 1.11 or later; %s is %d.%d", w.bin, major, minor)
	}
	t.Parallel()
	ctx := context.Background()
	name := randomName("acc-tok")
	config := func(write bool) string {
		c := fmt.Sprintf(`
ephemeral "qleet_token" "viewer" {
  name = %[1]q
  role = "viewer"
  ttl  = "5m"
}

provider "qleet" {
  alias = "viewer"
  token = ephemeral.qleet_token.viewer.token
}

data "qleet_kubernetes_runtimes" "seen" {
  provider = qleet.viewer
}

resource "terraform_data" "seen" {
  input = length(data.qleet_kubernetes_runtimes.seen.items)
}
`, name)
		if write {
			c += fmt.Sprintf(`
resource "qleet_workload_definition" "refused" {
  provider   = qleet.viewer
  name       = %q
  containers = [{ name = "web", image = "nginx:1.27" }]
}
`, name)
		}
		return c
	}
	tokensNamed := func() int {
		t.Helper()
		list, err := env.api.Tokens().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tok := range list {
			if tok.Name == name {
				n++
			}
		}
		return n
	}

	w.write(config(false))
	w.run("init", "-input=false")
	w.run("plan", "-input=false", "-lock=false", "-out=read.tfplan")
	if n := tokensNamed(); n != 0 {
		t.Fatalf("after the plan, %d tokens named %s are left: want them revoked", n, name)
	}
	// The saved plan's "configuration" repeats the configuration's text, values aside (OpenTofu lists the
	// ephemeral block and the provider's reference to it there): the values are in the rest.
	var plan map[string]any
	if err := json.Unmarshal(w.run("show", "-json", "read.tfplan"), &plan); err != nil {
		t.Fatal(err)
	}
	delete(plan, "configuration")
	values, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	shown := string(values)
	w.run("apply", "-input=false", "-lock=false", "read.tfplan")
	t.Cleanup(func() { w.run("destroy", "-auto-approve", "-input=false", "-lock=false") })
	if n := tokensNamed(); n != 0 {
		t.Fatalf("after the apply, %d tokens named %s are left: want them revoked", n, name)
	}
	state, err := os.ReadFile(filepath.Join(w.dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(state), `"qleet_kubernetes_runtimes"`) {
		t.Fatal("the viewer provider's data source is not in the state")
	}
	for where, text := range map[string]string{"state": string(state), "saved plan": shown} {
		if strings.Contains(text, `"qleet_token"`) || strings.Contains(text, `"expires_at"`) {
			t.Fatalf("the %s mentions the ephemeral token", where)
		}
	}

	// The token's role holds: a write through it is refused.
	w.write(config(true))
	code, out := w.exitCode("apply", "-auto-approve", "-input=false", "-lock=false", "-no-color")
	out = strings.Join(strings.Fields(out), " ")
	if code == 0 || !strings.Contains(out, `role "viewer" may not create, update or delete objects`) {
		t.Fatalf("a write with the viewer token: want it refused, got exit %d\n%s", code, out)
	}
	// Terraform 1.11 does not close an ephemeral resource when the apply fails: the token opened for the
	// apply is left, and its ttl bounds it.
	list, err := env.api.Tokens().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range list {
		if tok.Name != name {
			continue
		}
		if tok.Role != "viewer" || tok.ExpiresAt == nil || time.Until(*tok.ExpiresAt) > 5*time.Minute {
			t.Fatalf("a token left by a failed apply: want a viewer token expiring within its ttl (5m), got %+v", tok)
		}
		t.Logf("a failed apply left token %s, which expires in %s", tok.ID, time.Until(*tok.ExpiresAt).Round(time.Second))
	}
	w.write(config(false))
}
