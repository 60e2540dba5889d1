package reconcile_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// bundle is a real control plane without controllers: SQLite store, embedded NATS, relay and API server.
type bundle struct {
	store  store.Store
	broker *broker.Broker
	client *client.Client
	url    string
	dir    string
	token  string
}

type setupOpts struct {
	ackWait time.Duration
}

func setup(t testing.TB, opts setupOpts) *bundle {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	st, err := store.Open(ctx, store.Config{URL: filepath.Join(dir, "qleet.db")})
	require.NoError(t, err)
	b, err := broker.Start(ctx, broker.Config{DataDir: filepath.Join(dir, "nats"), AckWait: opts.ackWait, Logger: quietLogger()})
	require.NoError(t, err)
	relay := broker.NewRelay(b, st, broker.RelayConfig{PollInterval: 20 * time.Millisecond, Logger: quietLogger()})
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = relay.Run(ctx) }()
	srv, err := server.New(server.Config{Store: st, Logger: quietLogger(), OnCommit: relay.Notify})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	tok, err := server.NewToken()
	require.NoError(t, err)
	require.NoError(t, st.CreateToken(ctx, &store.Token{Hash: server.HashToken(tok), Name: "test", Role: server.RoleAdmin}))
	cl, err := client.New(hs.URL, client.WithToken(tok))
	require.NoError(t, err)
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-relayDone
		b.Close()
		_ = st.Close()
	})
	return &bundle{store: st, broker: b, client: cl, url: hs.URL, dir: dir, token: tok}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type defObj = api.WorkloadDefinition

// createDef creates a valid workload definition with the given name.
func (b *bundle) createDef(t testing.TB, name string) *defObj {
	t.Helper()
	obj, err := b.client.WorkloadDefinitions().Create(context.Background(), &defObj{
		Meta: api.Meta{Name: name},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}},
	})
	require.NoError(t, err)
	return obj
}

// run starts a controller for workload definitions and stops it at cleanup.
func (b *bundle) run(t testing.TB, rec reconcile.Reconciler[api.WorkloadDefinitionSpec, api.WorkloadDefinitionStatus], cfg reconcile.Config) (stop func()) {
	t.Helper()
	_, stop = b.runWith(t, b.client, rec, cfg)
	return stop
}

// runWith starts a controller for workload definitions that talks to the API through cl, and stops it
// at cleanup.
func (b *bundle) runWith(t testing.TB, cl *client.Client, rec reconcile.Reconciler[api.WorkloadDefinitionSpec, api.WorkloadDefinitionStatus], cfg reconcile.Config) (ctrl *reconcile.Controller[api.WorkloadDefinitionSpec, api.WorkloadDefinitionStatus], stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	c := reconcile.New(b.broker, cl.WorkloadDefinitions(), rec, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return c, stop
}

func waitCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func defMeta(name string, labels map[string]string) api.Meta {
	return api.Meta{Name: name, Labels: labels}
}

func defSpecValid() api.WorkloadDefinitionSpec {
	return api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}
}

func runtimeGOMAXPROCS() int { return runtime.GOMAXPROCS(0) }
