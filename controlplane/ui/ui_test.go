package ui_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// chromium finds Debian's chromium (scripts/ensure-chromium.sh installs it; `make deps` runs that), or
// the binary $QLEET_CHROMIUM names. A missing browser fails the test: it is never skipped.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("QLEET_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: run scripts/ensure-chromium.sh (make deps), or set QLEET_CHROMIUM")
	return ""
}

// browser starts a headless Chromium with a fresh profile that reaches nothing but the page's server.
func browser(t *testing.T) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1500, 950),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser, with no deadline: a deadline there would end the browser.
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// do runs browser steps, failing the test after d.
func do(t *testing.T, ctx context.Context, d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...), what)
}

// get runs one browser action and returns its value, failing the test after d.
func get[T any](t *testing.T, ctx context.Context, d time.Duration, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err, what)
	return v
}

// shownNode is a graph node as the page draws it.
type shownNode struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Phase string `json:"phase"`
	Text  string `json:"text"`
}

const shownNodesJS = `[...document.querySelectorAll('g.node')].map(g => ({kind: g.dataset.kind, name: g.dataset.name,
  phase: g.dataset.phase, text: [...g.querySelectorAll('text')].map(t => t.textContent).join(' | ')}))`

func node(kind, name string) chromedp.CSS {
	return chromedp.CSS(`g.node[data-kind="` + kind + `"][data-name="` + name + `"]`)
}

// TestWebView drives the web view in headless Chromium against a real control plane with a kubesim
// cluster: sign-in, the graph with its phases, a waiting node, an object page, live updates on both
// pages and a plan drawn on the graph. With QLEET_UI_SCREENSHOT=<path> it also writes a screenshot of the
// graph there (docs/images/ui-graph.png is made so).
func TestWebView(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("eu"), kubesimtest.WithRegion("eu-west"), kubesimtest.WithNodes(1))
	a, cl := cptest.Start(t, app.Config{ResyncInterval: 500 * time.Millisecond, DriftInterval: time.Second})
	ctx := context.Background()

	rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "eu"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: cptest.Kubeconfig(t, sim.Kubeconfig), Region: "eu-west"}})
	require.NoError(t, err)
	replicas := int32(2)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Replicas: &replicas, Containers: []api.Container{{
			Name: "web", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 80}}}}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	_, err = cl.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: "web-keys"},
		Spec: api.SecretSpec{InstanceIDs: []string{inst.ID}, Values: map[string]string{"API_KEY": "s3cr3t"}}})
	require.NoError(t, err)
	gw, err := cl.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "web"},
		Spec: api.GatewaySpec{InstanceID: inst.ID, Hosts: []string{"app.example.test"}}})
	require.NoError(t, err)
	_, err = cl.Gateways().WaitReconciled(cptest.Wait(t, 3*time.Minute), gw.ID)
	require.NoError(t, err)
	inst, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, time.Minute), inst.ID)
	require.NoError(t, err)
	_, err = cl.WorkloadDefinitions().WaitReconciled(cptest.Wait(t, time.Minute), def.ID)
	require.NoError(t, err)

	// A runtime that cannot be reached, and an instance on it that waits for it.
	dead, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "unreachable"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Region: "us-east",
			Kubeconfig: regexp.MustCompile(`server: \S+`).ReplaceAllString(cptest.Kubeconfig(t, sim.Kubeconfig), "server: https://127.0.0.1:1")}})
	require.NoError(t, err)

	token, err := os.ReadFile(filepath.Join(a.DataDir(), "admin.token"))
	require.NoError(t, err)
	b := browser(t)

	t.Run("sign-in refuses a wrong token and takes the right one", func(t *testing.T) {
		do(t, b, time.Minute, "wrong token",
			chromedp.Navigate(a.Endpoint+"/ui/"),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), "qlt_wrong"),
			chromedp.Click(chromedp.ID("signin")),
			chromedp.WaitVisible(chromedp.ID("signin-error")))
		require.Contains(t, get(t, b, 10*time.Second, "error", chromedp.Text(chromedp.ID("signin-error"))), "401")
		do(t, b, 30*time.Second, "right token",
			chromedp.SetValue(chromedp.ID("token"), strings.TrimSpace(string(token))),
			chromedp.Click(chromedp.ID("signin")),
			chromedp.WaitVisible(node("workload_instance", "web")))
		kept := get(t, b, 10*time.Second, "token kept", chromedp.Evaluate[string](`sessionStorage.getItem('qleet.token')`))
		require.Equal(t, strings.TrimSpace(string(token)), kept, "the token is kept for this tab only")
		require.NotContains(t, get(t, b, 10*time.Second, "url", chromedp.Evaluate[string](`location.href`)), kept, "and never put in a URL")
	})

	t.Run("the graph shows every object coloured by phase, in its region", func(t *testing.T) {
		nodes := get(t, b, 30*time.Second, "read nodes", chromedp.Evaluate[[]shownNode](shownNodesJS))
		got := map[string]shownNode{}
		for _, n := range nodes {
			got[n.Kind+"/"+n.Name] = n
		}
		for _, key := range []string{"kubernetes_runtime/eu", "workload_definition/web", "workload_instance/web", "gateway/web", "secret/web-keys"} {
			require.Contains(t, got, key, "shown: %v", nodes)
			require.Equal(t, "Ready", got[key].Phase, key)
			require.Contains(t, got[key].Text, "Ready", key)
		}
		services := 0
		for _, n := range nodes {
			if n.Kind == "support_service" {
				services++
				require.Equal(t, "Ready", n.Phase, n.Name)
			}
		}
		require.GreaterOrEqual(t, services, 2, "the ingress controller and cert-manager the gateway installed")
		fill := get(t, b, 10*time.Second, "stripe colour", chromedp.Evaluate[string](
			`getComputedStyle(document.querySelector('`+string(node("workload_instance", "web"))+` .stripe')).fill`))
		require.Equal(t, "rgb(22, 163, 74)", fill, "Ready is green")
		band := get(t, b, 10*time.Second, "instance band", chromedp.Evaluate[string](`(() => {
			const y = document.querySelector('`+string(node("workload_instance", "web"))+`').transform.baseVal[0].matrix.f;
			return [...document.querySelectorAll('g.band')].find(g => { const r = g.querySelector('rect');
				return y >= r.y.baseVal.value && y <= r.y.baseVal.value + r.height.baseVal.value; }).dataset.band;
		})()`))
		require.Equal(t, "eu-west", band, "the instance sits in its runtime's region")
	})

	t.Run("a waiting node shows what it waits on and since when, live", func(t *testing.T) {
		_, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "waiter"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: dead.ID}})
		require.NoError(t, err)
		waiting := string(node("workload_instance", "waiter"))
		do(t, b, time.Minute, "the waiting instance appears without a reload",
			chromedp.WaitVisible(node("workload_instance", "waiter")),
			chromedp.WaitVisible(chromedp.CSS(waiting+" .waiting-on"), chromedp.RetryInterval(100*time.Millisecond)))
		on := get(t, b, 10*time.Second, "waits on", chromedp.TextContent(chromedp.CSS(waiting+" .waiting-on")))
		require.Equal(t, `on kubernetes_runtime "unreachable"`, on)
		since := get(t, b, 10*time.Second, "since", chromedp.TextContent(chromedp.CSS(waiting+" .waiting")))
		require.Regexp(t, `^(Pending|Reconciling) · waiting \d+(s|m\d+s)$`, since, "and for how long")
		do(t, b, 30*time.Second, "the time waited grows",
			chromedp.Poll[chromedp.Void](`/waiting ([3-9]|\d\d+)s$/.test(document.querySelector('`+waiting+` .waiting').textContent)`))
	})

	t.Run("the object page shows spec, conditions, events, applied objects and replicas", func(t *testing.T) {
		do(t, b, 30*time.Second, "open the instance",
			chromedp.Click(node("workload_instance", "web")),
			chromedp.WaitVisible(chromedp.ID("object-page")),
			chromedp.WaitVisible(chromedp.ID("events")))
		text := func(id string) string { return get(t, b, 10*time.Second, id, chromedp.Text(chromedp.ID(id))) }
		require.Equal(t, "web", text("object-name"))
		require.Contains(t, text("spec"), def.ID)
		providers := text("providers")
		require.Contains(t, providers, "workload definition web")
		require.Contains(t, providers, "kubernetes runtime eu")
		require.Contains(t, providers, "secret web-keys", "status.dependencies count as what it depends on")
		require.Contains(t, text("consumers"), "gateway web")

		do(t, b, 30*time.Second, "its part of the graph",
			chromedp.Click(chromedp.ID("focus-link")),
			chromedp.WaitVisible(chromedp.ID("focus")),
			chromedp.WaitVisible(chromedp.CSS(string(node("workload_instance", "web"))+".root")))
		focused := get(t, b, 10*time.Second, "focused nodes", chromedp.Evaluate[[]shownNode](shownNodesJS))
		names := map[string]bool{}
		for _, n := range focused {
			names[n.Kind+"/"+n.Name] = true
		}
		require.True(t, names["kubernetes_runtime/eu"] && names["gateway/web"] && names["workload_definition/web"], "its providers and consumers: %v", names)
		require.False(t, names["kubernetes_runtime/unreachable"], "and nothing it is not connected to: %v", names)
		do(t, b, 30*time.Second, "back to its page",
			chromedp.Click(node("workload_instance", "web")),
			chromedp.WaitVisible(chromedp.ID("object-page")))
		require.Contains(t, text("conditions"), "Ready")
		evs, err := cl.WorkloadInstances().Events(ctx, inst.ID)
		require.NoError(t, err)
		require.NotEmpty(t, evs)
		require.Contains(t, text("events"), evs[0].Reason)
		applied := text("applied")
		require.Contains(t, applied, "Deployment")
		require.Contains(t, applied, inst.Status.Namespace)
		require.Contains(t, text("pods"), "2", "two replicas")
	})

	t.Run("the object page follows a change made through the API", func(t *testing.T) {
		cur, err := cl.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		cur.Labels = map[string]string{"tier": "frontend"}
		upd, err := cl.WorkloadInstances().Update(ctx, cur)
		require.NoError(t, err)
		do(t, b, 30*time.Second, "the new resource version and label show",
			chromedp.Poll[chromedp.Void](`+(document.querySelector('#object-rv') || {}).textContent >= `+strconv.FormatInt(upd.ResourceVersion, 10)),
			chromedp.Poll[chromedp.Void](`document.querySelector('#object-page').textContent.includes('tier=frontend')`))
	})

	if path := os.Getenv("QLEET_UI_SCREENSHOT"); path != "" {
		do(t, b, 30*time.Second, "graph", chromedp.Navigate(a.Endpoint+"/ui/#/"), chromedp.WaitVisible(node("gateway", "web")),
			chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 1, 1)) // no node under the pointer: none drawn hovered
		png := get(t, b, 30*time.Second, "screenshot", chromedp.Screenshot(chromedp.ID("graph")))
		require.NoError(t, os.WriteFile(path, png, 0o644))
	}

	t.Run("a plan is drawn on the graph, new objects dashed", func(t *testing.T) {
		req, err := json.Marshal(api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanCreate, Kind: "workload_instance", Name: "web-two",
			Spec: json.RawMessage(`{"definition_id":"` + def.ID + `","runtime_id":"` + rt.ID + `"}`)}}})
		require.NoError(t, err)
		planned := chromedp.CSS(`g.node.planned[data-name="web-two"]`)
		do(t, b, 30*time.Second, "preview",
			chromedp.Navigate(a.Endpoint+"/ui/#/plan"),
			chromedp.WaitVisible(chromedp.ID("plan-input")),
			chromedp.SetValue(chromedp.ID("plan-input"), string(req)),
			chromedp.Click(chromedp.ID("plan-run")),
			chromedp.WaitVisible(chromedp.ID("plan-actions")),
			chromedp.WaitVisible(planned))
		actions := get(t, b, 10*time.Second, "actions", chromedp.Text(chromedp.ID("plan-actions")))
		require.Contains(t, actions, "create")
		require.Contains(t, actions, "web-two")
		dash := get(t, b, 10*time.Second, "dash", chromedp.Evaluate[string](
			`getComputedStyle(document.querySelector('`+string(planned)+` .box')).strokeDasharray`))
		require.NotEqual(t, "none", dash, "a planned node is dashed")
		_, err = cl.WorkloadInstances().GetByName(ctx, "web-two")
		require.True(t, api.IsNotFound(err), "the plan changed nothing: %v", err)

		do(t, b, 30*time.Second, "a bad plan",
			chromedp.SetValue(chromedp.ID("plan-input"), `{"changes":[{"op":"create","kind":"workload_instance","name":"bad","spec":{}}]}`),
			chromedp.Click(chromedp.ID("plan-run")),
			chromedp.WaitVisible(chromedp.ID("plan-error")))
		require.Contains(t, get(t, b, 10*time.Second, "error", chromedp.Text(chromedp.ID("plan-error"))), "changes[0].spec", "the error names the field")
	})
}
