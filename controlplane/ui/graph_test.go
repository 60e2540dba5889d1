package ui_test

import (
	"bytes"
	"context"
	"flag"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

var update = flag.Bool("update", false, "rewrite docs/images/webview-*.png from TestWebViewGraphs")

// The window the graphs must fit in.
const winW, winH = 1400, 900

// graphReport is what the page measures of the drawn graph after "fit" (see graphReportJS).
type graphReport struct {
	Nodes     int      `json:"nodes"`
	Edges     int      `json:"edges"`
	Scale     float64  `json:"scale"`
	Outside   []string `json:"outside"`   // nodes not wholly inside the window and the graph's frame
	Crossings []string `json:"crossings"` // edges that pass through a box that is neither of their ends
	Nulls     int      `json:"nulls"`     // text nodes reading "null"
	Untitled  []string `json:"untitled"`  // nodes whose title lacks their full kind and name
	Cut       []string `json:"cut"`       // names shown shortened without an ellipsis, or overflowing the box
	Shortened []string `json:"shortened"` // names shown with an ellipsis
	PageWidth float64  `json:"pageWidth"` // the document's scroll width: nothing sticks out to the right
}

// graphReportJS measures the graph as laid out by the browser: node boxes against the window, every
// edge sampled along its path against every box it does not start or end at, and the text shown.
const graphReportJS = `(() => {
  const svg = document.querySelector('svg#graph');
  const frame = svg.getBoundingClientRect();
  const r = { nodes: 0, edges: 0, scale: +svg.dataset.scale, outside: [], crossings: [], nulls: 0, untitled: [], cut: [], shortened: [],
    pageWidth: document.documentElement.scrollWidth };
  const boxes = [];
  for (const g of document.querySelectorAll('g.node')) {
    r.nodes++;
    const box = g.querySelector('rect.box');
    const b = box.getBoundingClientRect();
    const label = g.dataset.kind + '/' + g.dataset.name;
    if (b.left < Math.max(0, frame.left) - 0.5 || b.top < Math.max(0, frame.top) - 0.5 ||
        b.right > Math.min(innerWidth, frame.right) + 0.5 || b.bottom > Math.min(innerHeight, frame.bottom) + 0.5) {
      r.outside.push(label + ' at ' + [b.left, b.top, b.right, b.bottom].map(Math.round).join(','));
    }
    // The box in the graph's own coordinates (the edges' coordinates).
    const m = g.transform.baseVal.consolidate().matrix;
    boxes.push({ id: g.dataset.id, label, x: m.e, y: m.f, w: box.width.baseVal.value, h: box.height.baseVal.value });
    const title = g.querySelector(':scope > title');
    const kindName = g.dataset.kind.replace(/_/g, ' ') + ' ' + g.dataset.name;
    if (!title || !title.textContent.includes(kindName)) r.untitled.push(label);
    const name = g.querySelector('text.name');
    const shown = name.textContent;
    if (shown !== g.dataset.name) {
      if (shown.endsWith('…') && g.dataset.name.startsWith(shown.slice(0, -1))) r.shortened.push(label);
      else r.cut.push(label + ' shown as ' + JSON.stringify(shown));
    }
    if (name.getBBox().x + name.getComputedTextLength() > box.width.baseVal.value - 4) r.cut.push(label + ' overflows its box');
  }
  for (const p of document.querySelectorAll('path.edge')) {
    r.edges++;
    const len = p.getTotalLength();
    const hit = new Set();
    for (let l = 0; l <= len; l += 2) {
      const pt = p.getPointAtLength(l);
      for (const b of boxes) {
        if (b.id === p.dataset.from || b.id === p.dataset.to) continue;
        if (pt.x > b.x + 1 && pt.x < b.x + b.w - 1 && pt.y > b.y + 1 && pt.y < b.y + b.h - 1) hit.add(b.label);
      }
    }
    for (const b of hit) r.crossings.push(p.dataset.from + ' > ' + p.dataset.to + ' crosses ' + b);
  }
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) if (walk.currentNode.textContent.trim() === 'null') r.nulls++;
  return r;
})()`

// TestWebViewGraphs draws the quickstart's and the seeds example's estates (the same objects as
// examples/quickstart and examples/seeds, made through the Go client) in headless Chromium in a
// 1400×900 window, and checks what a person sees: after "fit" every box is in the window, no edge passes
// through a box, every name is whole in its tooltip and shortened only with an ellipsis, no stray
// "null", and a screenshot that is neither empty nor the wrong size. The page is opened before the
// objects exist, so that it is drawn by live updates as the estate comes up. With -update it writes
// docs/images/webview-quickstart.png and docs/images/webview-seeds.png.
func TestWebViewGraphs(t *testing.T) {
	b := browser(t)
	for _, tc := range []struct {
		name   string
		create func(t *testing.T, cl *client.Client)
	}{
		{"quickstart", createQuickstart},
		{"seeds", createSeeds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second, DriftInterval: 2 * time.Second, RuntimeRecheck: time.Second})
			token, err := os.ReadFile(filepath.Join(a.DataDir(), "admin.token"))
			require.NoError(t, err)
			do(t, b, time.Minute, "sign in",
				chromedp.EmulateViewport(winW, winH),
				chromedp.Navigate(a.Endpoint+"/ui/"),
				chromedp.WaitVisible(chromedp.ID("token")),
				chromedp.SetValue(chromedp.ID("token"), strings.TrimSpace(string(token))),
				chromedp.Click(chromedp.ID("signin")),
				chromedp.WaitVisible(chromedp.ID("summary")))

			tc.create(t, cl)
			g, err := cl.Graph(context.Background(), "")
			require.NoError(t, err)
			// Every object is drawn, Ready, and the live updates have stopped changing the page.
			do(t, b, 5*time.Minute, "every object drawn and Ready",
				chromedp.Poll[chromedp.Void](`(() => { const ns = [...document.querySelectorAll('g.node')];
					return ns.length >= `+strconv.Itoa(len(g.Nodes))+` && ns.every(n => n.dataset.phase === 'Ready'); })()`,
					chromedp.WithPollingInterval(200*time.Millisecond)))
			require.NotEmpty(t, get(t, b, 10*time.Second, "live updates", chromedp.Evaluate[string](`document.body.dataset.updates || ''`)),
				"the graph was drawn by live updates")
			do(t, b, 30*time.Second, "fit, with the pointer away from the boxes",
				chromedp.Click(chromedp.ID("graph-fit")),
				chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 1, 1))

			rep := get(t, b, 30*time.Second, "measure", chromedp.Evaluate[graphReport](graphReportJS))
			t.Logf("%s: %d nodes, %d edges, scale %.2f, shortened %v", tc.name, rep.Nodes, rep.Edges, rep.Scale, rep.Shortened)
			require.GreaterOrEqual(t, rep.Nodes, len(g.Nodes))
			require.GreaterOrEqual(t, rep.Edges, len(g.Edges))
			require.Empty(t, rep.Outside, "after fit, every box is in the %dpx window", winW)
			require.LessOrEqual(t, rep.PageWidth, float64(winW), "nothing sticks out to the right")
			require.Empty(t, rep.Crossings, "edges go around boxes")
			require.Zero(t, rep.Nulls, "no stray null")
			require.Empty(t, rep.Untitled, "the full name is in each box's tooltip")
			require.Empty(t, rep.Cut, "names are shortened only with an ellipsis, inside the box")
			require.Greater(t, rep.Scale, 0.5, "fit keeps the text readable")

			// Every object of the API's graph is drawn, under its full name in a tooltip.
			titles := get(t, b, 10*time.Second, "titles", chromedp.Evaluate[[]string](`[...document.querySelectorAll('g.node > title')].map(t => t.textContent)`))
			all := strings.Join(titles, "\n")
			for _, n := range g.Nodes {
				require.Contains(t, all, strings.ReplaceAll(n.Kind, "_", " ")+" "+n.Name)
			}

			shot := get(t, b, 30*time.Second, "screenshot", chromedp.CaptureScreenshot())
			checkScreenshot(t, shot)
			if *update {
				require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", "images", "webview-"+tc.name+".png"), shot, 0o644))
			}
			checkPanZoom(t, b, rep.Scale)
		})
	}
}

// point is a position in the window, in CSS pixels.
type point struct{ X, Y float64 }

// Where to press in the graph: on nothing (a point of the frame outside every box), and on a node.
const (
	backgroundJS = `(() => {
  const f = document.querySelector('svg#graph').getBoundingClientRect();
  const boxes = [...document.querySelectorAll('g.node rect.box')].map(r => r.getBoundingClientRect());
  for (let y = f.bottom - 12; y > f.top; y -= 10) for (let x = f.right - 12; x > f.left; x -= 10) {
    if (!boxes.some(b => x > b.left - 4 && x < b.right + 4 && y > b.top - 4 && y < b.bottom + 4)) return { X: x, Y: y };
  }
  return null;
})()`
	shownNodeJS = `(() => { const f = document.querySelector('svg#graph').getBoundingClientRect();
  for (const r of document.querySelectorAll('g.node rect.box')) { const b = r.getBoundingClientRect();
    const p = { X: b.left + b.width / 2, Y: b.top + b.height / 2 };
    if (p.X > f.left && p.X < f.right && p.Y > f.top && p.Y < f.bottom) return p; }
  return null; })()`
	firstNodeAtJS = `(() => { const b = document.querySelector('g.node rect.box').getBoundingClientRect(); return { X: b.left, Y: b.top }; })()`
	scaleJS       = `+document.querySelector('svg#graph').dataset.scale`
)

// drag presses the left button at from, moves to to in steps, and releases it there.
func drag(from, to point) chromedp.Action[chromedp.Void] {
	left := func(p *input.DispatchMouseEventParams) {
		p.Button = input.MouseButtonLeft
		p.Buttons = 1
		p.ClickCount = 1
	}
	steps := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, from.X, from.Y, left)}
	for i := 1; i <= 5; i++ {
		f := float64(i) / 5
		steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, from.X+(to.X-from.X)*f, from.Y+(to.Y-from.Y)*f, left))
	}
	steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, to.X, to.Y, left))
	return chromedp.Steps(steps...)
}

// checkPanZoom zooms with the wheel, pans by dragging, checks that a drag that starts on a node does not
// open it, and that "Fit" brings back the whole graph at the fitted scale.
func checkPanZoom(t *testing.T, b context.Context, fitted float64) {
	t.Helper()
	bg := get(t, b, 10*time.Second, "a point on no box", chromedp.Evaluate[*point](backgroundJS))
	require.NotNil(t, bg, "the frame has room outside the boxes")
	// The protocol wants deltaX too, and cdproto leaves a zero out: one pixel sideways, which the page ignores.
	wheel := func(p *input.DispatchMouseEventParams) { p.DeltaX, p.DeltaY = 1, -240 }
	do(t, b, 10*time.Second, "wheel up", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseWheel, bg.X, bg.Y, wheel))
	zoomed := get(t, b, 10*time.Second, "scale", chromedp.Evaluate[float64](scaleJS))
	require.Greater(t, zoomed, fitted*1.2, "the wheel zooms in")

	hash := get(t, b, 10*time.Second, "hash", chromedp.Evaluate[string](`location.hash`))
	before := get(t, b, 10*time.Second, "node", chromedp.Evaluate[point](firstNodeAtJS))
	bg = get(t, b, 10*time.Second, "a point on no box", chromedp.Evaluate[*point](backgroundJS))
	require.NotNil(t, bg)
	do(t, b, 10*time.Second, "drag the background", drag(*bg, point{bg.X - 120, bg.Y - 80}))
	after := get(t, b, 10*time.Second, "node", chromedp.Evaluate[point](firstNodeAtJS))
	require.InDelta(t, before.X-120, after.X, 1, "a drag pans the graph")
	require.InDelta(t, before.Y-80, after.Y, 1, "a drag pans the graph")

	on := get(t, b, 10*time.Second, "a node in the frame", chromedp.Evaluate[*point](shownNodeJS))
	require.NotNil(t, on, "a node is still in the frame")
	do(t, b, 10*time.Second, "drag from a node", drag(*on, point{on.X + 60, on.Y + 40}))
	require.Equal(t, hash, get(t, b, 10*time.Second, "hash", chromedp.Evaluate[string](`location.hash`)), "a drag is not a click on the node")
	require.Equal(t, zoomed, get(t, b, 10*time.Second, "scale", chromedp.Evaluate[float64](scaleJS)), "a drag keeps the zoom")

	do(t, b, 10*time.Second, "fit", chromedp.Click(chromedp.ID("graph-fit")))
	require.InDelta(t, fitted, get(t, b, 10*time.Second, "scale", chromedp.Evaluate[float64](scaleJS)), 0.001, "Fit shows the whole graph again")
	rep := get(t, b, 30*time.Second, "measure", chromedp.Evaluate[graphReport](graphReportJS))
	require.Empty(t, rep.Outside)
}

// checkScreenshot fails unless the screenshot is the window's size and shows a drawn graph: many
// pixels off the page's background, in several colours (the phase colours, the text, the edges).
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, winW, winH), img.Bounds())
	bg := img.At(winW-3, winH-3)
	colours := map[[3]uint32]bool{}
	off := 0
	for y := 0; y < winH; y += 2 {
		for x := 0; x < winW; x += 2 {
			c := img.At(x, y)
			r, g, bl, _ := c.RGBA()
			colours[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
			if c != bg {
				off++
			}
		}
	}
	require.Greater(t, len(colours), 50, "more than a blank page")
	require.Greater(t, off, winW*winH/4/5, "at least a fifth of the window is drawn on")
}

// createQuickstart makes examples/quickstart's objects.
func createQuickstart(t *testing.T, cl *client.Client) {
	ctx := context.Background()
	labels := map[string]string{"app": "quickstart"}
	_, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default", Labels: labels},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}, Nodes: 2, MinNodes: 2, MaxNodes: 4}})
	require.NoError(t, err)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "hello", Labels: labels},
		Spec: api.WorkloadDefinitionSpec{
			Containers: []api.Container{{Name: "web", Image: "nginx:1.27", Ports: []api.ContainerPort{{Name: "http", ContainerPort: 80}},
				Resources:      &api.Resources{Requests: api.ResourceList{CPU: "50m", Memory: "32Mi"}, Limits: api.ResourceList{Memory: "64Mi"}},
				ReadinessProbe: &api.Probe{HTTPGetPath: "/", Port: 80}}},
			Autoscaling: &api.Autoscaling{MinReplicas: 1, MaxReplicas: 3, TargetCPUPercent: 75}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "hello", Labels: labels},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}},
			Env: []api.EnvVar{{Name: "GREETING", Value: "hello from QleetOS"}}}})
	require.NoError(t, err)
	gw, err := cl.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "hello"},
		Spec: api.GatewaySpec{InstanceID: inst.ID, Hosts: []string{"hello.example.test"}}})
	require.NoError(t, err)
	_, err = cl.Gateways().WaitReconciled(cptest.Wait(t, 5*time.Minute), gw.ID)
	require.NoError(t, err)
	_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, time.Minute), inst.ID)
	require.NoError(t, err)
}

// createSeeds makes examples/seeds' objects: two regions from a profile, an RPC node that follows the
// app, a database with one home, a secret and a gateway.
func createSeeds(t *testing.T, cl *client.Client) {
	ctx := context.Background()
	_, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "seeds"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}, Nodes: 2}})
	require.NoError(t, err)
	rpcDef, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "rpc"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "node", Image: "ethereum/client-go:v1.14.12",
			Ports: []api.ContainerPort{{Name: "rpc", ContainerPort: 8545}}}}}})
	require.NoError(t, err)
	rpc, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "rpc"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: rpcDef.ID}})
	require.NoError(t, err)
	db, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "seeds"}, Spec: api.DatabaseSpec{Retain: true}})
	require.NoError(t, err)
	appDef, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "app"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27",
			Ports: []api.ContainerPort{{Name: "http", ContainerPort: 80}}}}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "app"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: appDef.ID, Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}},
			Uses:      []api.Use{{InstanceID: rpc.ID, EnvPrefix: "RPC", Placement: api.UseWithConsumers}},
			Databases: []string{db.ID}}})
	require.NoError(t, err)
	_, err = cl.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: "api"},
		Spec: api.SecretSpec{InstanceIDs: []string{inst.ID}, Values: map[string]string{"API_TOKEN": "not-a-real-token"}}})
	require.NoError(t, err)
	gw, err := cl.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "app"},
		Spec: api.GatewaySpec{InstanceID: inst.ID, Hosts: []string{"app.seeds.test"}}})
	require.NoError(t, err)
	_, err = cl.Gateways().WaitReconciled(cptest.Wait(t, 6*time.Minute), gw.ID)
	require.NoError(t, err)
	_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
	require.NoError(t, err)
	_, err = cl.Databases().WaitReconciled(cptest.Wait(t, 2*time.Minute), db.ID)
	require.NoError(t, err)
}
