package app_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/support"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// TestUnfetchableChartEndsTheWaitWithItsReason: a control plane whose support chart mirror cannot be
// reached (a closed port) and that has no chart directory stalls the support services a gateway needs
// (ChartUnreachable, naming the mirror), and the gateway with them, so that a waiter stops with the
// reason instead of waiting in silence; the gateway's root cause is the support service. Neither goes
// Failed: once the mirror answers, they install and the gateway goes Ready by itself.
func TestUnfetchableChartEndsTheWaitWithItsReason(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("offline"), kubesimtest.WithNodes(1))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there until the mirror "comes back"
	mirror := "http://" + addr
	_, cl := cptest.Start(t, app.Config{ResyncInterval: 30 * time.Second, DriftInterval: time.Minute,
		SupportChartDir: t.TempDir(), SupportChartMirror: mirror})
	ctx := context.Background()
	rt := readyRuntime(t, cl, "offline", sim.Kubeconfig)
	def := webDefinition(t, cl, "web", 1, "")
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	gw, err := cl.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "web"},
		Spec: api.GatewaySpec{InstanceID: inst.ID, Hosts: []string{"web.example.test"}}})
	require.NoError(t, err)

	t.Run("the gateway's wait ends with the chart's reason", func(t *testing.T) {
		start := time.Now()
		_, err := cl.Gateways().WaitReconciled(cptest.Wait(t, 2*time.Minute), gw.ID)
		var fe *client.FailedError
		require.ErrorAs(t, err, &fe, "the wait ends, not times out: %v", err)
		t.Logf("wait ended after %s: %v", time.Since(start).Round(100*time.Millisecond), err)
		require.NotNil(t, fe.Stalled, "stalled, not failed: it retries")
		require.Equal(t, support.ReasonChartUnreachable, fe.Stalled.Reason)
		require.Contains(t, fe.Stalled.Message, mirror, "names the mirror")
		require.Contains(t, fe.Stalled.Message, "--support-chart-dir", "says the way out")
		require.NotEqual(t, api.PhaseFailed, fe.Status.Phase)

		// The wait ends on the first support service that stalls; the other may not have had its first
		// reconcile yet (Pending), so each is awaited to its own stall rather than read once.
		await.NoError(t, time.Minute, func(context.Context) error {
			byType := supportServicesOn(t, cl, rt.ID)
			for _, typ := range []string{api.SupportIngress, api.SupportCertManager} {
				if len(byType[typ]) == 0 {
					return fmt.Errorf("no %s support service on the runtime yet", typ)
				}
				got := byType[typ][0]
				c := api.StalledCondition(got.Generation, &got.Status.Status)
				if got.Status.Phase != api.PhaseReconciling || c == nil {
					return fmt.Errorf("%s: %s, not stalled yet: %s", got.Name, got.Status.Phase, got.Status.Message)
				}
				if c.Reason != support.ReasonChartUnreachable {
					return fmt.Errorf("%s stalled for %s, want %s", got.Name, c.Reason, support.ReasonChartUnreachable)
				}
			}
			return nil
		})
		g, err := cl.Graph(ctx, "gateway/web")
		require.NoError(t, err)
		chain := g.RootCause(gw.ID)
		require.GreaterOrEqual(t, len(chain), 2)
		root := chain[len(chain)-1]
		require.Equal(t, api.KindSupportService, root.Kind, "the root cause is the support service: %+v", chain)
		require.Contains(t, root.Message, support.ReasonChartUnreachable)
	})

	t.Run("it goes on by itself once the mirror answers", func(t *testing.T) {
		serveChartMirror(t, addr)
		start := time.Now()
		var got *api.Gateway
		await.NoError(t, 3*time.Minute, func(ctx context.Context) error {
			g, err := cl.Gateways().Get(ctx, gw.ID)
			if err != nil {
				return err
			}
			if !api.Reconciled(g.Generation, &g.Status.Status) {
				return fmt.Errorf("gateway %s: %s", g.Status.Phase, g.Status.Message)
			}
			got = g
			return nil
		})
		t.Logf("Ready %s after the mirror answered (the retry backs off up to 2m)", time.Since(start).Round(100*time.Millisecond))
		require.Nil(t, api.StalledCondition(got.Generation, &got.Status.Status))
		for typ, ss := range supportServicesOn(t, cl, rt.ID) {
			require.Contains(t, ss[0].Status.Chart, "from "+mirror, typ)
		}
	})
}

// serveChartMirror serves, at addr, a Helm chart repository holding the repository's stand-in support
// charts under the pinned upstream charts' names and versions: a mirror, as an air-gapped site has one.
func serveChartMirror(t *testing.T, addr string) {
	t.Helper()
	dir := t.TempDir()
	for typ, up := range api.SupportCharts {
		c, err := loader.Load(filepath.Join(cptest.SupportCharts(), typ))
		require.NoError(t, err)
		c.Metadata.Name, c.Metadata.Version = up.Chart, up.Version
		_, err = chartutil.Save(c, dir)
		require.NoError(t, err)
	}
	idx, err := repo.IndexDirectory(dir, "http://"+addr)
	require.NoError(t, err)
	require.NoError(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}
