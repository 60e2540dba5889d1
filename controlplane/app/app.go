// Package app assembles the control plane from its parts: store, broker, outbox relay, API server and
// controllers. `qleet server` runs all of them in one process; `qleet api` and `qleet controller` run
// halves of it for scale-out. Tests and the provider's acceptance tests start it in-process.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// Config configures the control plane. Zero values take the documented defaults.
type Config struct {
	// DataDir holds the SQLite database, the embedded NATS store, tokens and local clusters (default ./.qleet).
	DataDir string
	// Listen is the API address (default 127.0.0.1:8080; port 0 picks a free one).
	Listen string
	// DatabaseURL selects the store: a PostgreSQL URL, or empty for SQLite at <DataDir>/qleet.db.
	DatabaseURL string
	// NATSURL selects an external NATS; empty runs an embedded server storing under <DataDir>/nats.
	NATSURL string
	// API runs the API server and the outbox relay.
	API bool
	// Controllers runs the controllers.
	Controllers bool
	// APIEndpoint and ControllerToken point controllers at a remote API (controller-only mode). In
	// all-in-one mode the controllers use this process's API and a token minted in DataDir.
	APIEndpoint     string
	ControllerToken string
	// Workers per controller (default 16: reconciles mostly wait on the network, the same default as
	// `qleet server --workers`). The workload_instance controller gets four times as many.
	Workers int
	// ResyncInterval and DriftInterval tune the controllers' safety net (defaults 30s, after a possible
	// loss of notifications, and 10h: reconcile.Config's fields of the same names). Drift is learned
	// from the clusters' watches.
	ResyncInterval time.Duration
	DriftInterval  time.Duration
	// LockTTL is the per-object lock TTL (default 10s).
	LockTTL time.Duration
	// FailedRecheckInterval is how often Failed objects are reconciled again (default 5m).
	FailedRecheckInterval time.Duration
	// ProgressDeadline is how long a rollout may make no progress before it is Stalled (default workload.DefaultProgressDeadline, 5m).
	ProgressDeadline time.Duration
	// CleanupGrace is how long a deletion waits for an unreachable cluster before the object's status
	// offers orphaning (default 2m).
	CleanupGrace time.Duration
	// SupportChartDir holds local charts for support services, by type (e.g. <dir>/ingress); a type found
	// there is installed from it instead of its upstream chart repository (the only way offline).
	SupportChartDir string
	// SupportChartMirror is a chart repository (https, http or oci URL) that holds the pinned upstream
	// support charts under their upstream names and versions; it is used instead of their upstream
	// repositories (air-gapped, with a mirror). A type SupportChartDir holds is installed from there.
	SupportChartMirror string
	// RuntimeRecheck is how often a Ready runtime with node autoscaling or a reclaiming profile is looked
	// at again (default 30s).
	RuntimeRecheck time.Duration
	// ScaleDownDelay is how long a node added by autoscaling must be idle before it goes (default 2m).
	ScaleDownDelay time.Duration
	// OwnerGrace is how long an object created for owners outlives them before it is garbage-collected
	// (default 5m).
	OwnerGrace time.Duration
	// HealthListen is the address of controller-only mode's /healthz, /readyz and /metrics (no token);
	// empty serves none. Ignored when the API runs in this process: it serves its own.
	HealthListen string
	// APICACertFile is the CA certificate of a remote API served over TLS (controller-only mode).
	APICACertFile string
	// TLSCertFile and TLSKeyFile serve the API over TLS. When the listen address is not loopback and none
	// is given, a self-signed certificate is made in the data dir (tls.crt). Loopback serves plain HTTP.
	TLSCertFile string
	TLSKeyFile  string
	// TLSSANs are extra names and addresses the self-signed certificate covers, beyond loopback, the
	// listen address (every interface's when it is a wildcard) and the host name.
	TLSSANs []string
	// MetricsAuth is "auto" (default: /metrics needs a token when the API listens beyond loopback),
	// "on" or "off".
	MetricsAuth string
	// SecretKeyFile holds the 32-byte key (base64) that encrypts secrets at rest; API replicas must share
	// it (default <DataDir>/secret.key, made on first start with mode 0600).
	SecretKeyFile string
	// ChartDir is the only directory local Helm charts are read from (default <DataDir>/charts); charts
	// elsewhere come from a repository.
	ChartDir string
	// MaxReplicasPerRole caps, per token role, the replicas a spec may ask for (server.Config's field of
	// the same name). Default: none beyond api.MaxReplicas.
	MaxReplicasPerRole map[string]int
	// KubesimBinary overrides where local runtimes' kubesim binary is found.
	KubesimBinary string
	// SimulateCompute replaces the workload_instance reconciler with workload.NoopInstanceReconciler,
	// which reads and renders like the real one but never touches a cluster. FOR SIMULATION ONLY (the
	// benchmark's 100,000-instance section): instances are reported Ready without running anywhere.
	SimulateCompute bool
	// AWSPoll is how soon a runtime or data service waiting on AWS (a cluster CREATING) is looked at
	// again (default 5s).
	AWSPoll time.Duration
	// Logger receives logs (default slog.Default()).
	Logger *slog.Logger
	// NATSReplicas is the replica count of the reconcile stream and lock bucket on an external NATS
	// cluster (broker.Config.Replicas; default: keep what exists, 1 for new ones).
	NATSReplicas int
	// LockSpans, when set, receives the controllers' lock-span lines (reconcile.Config.LockSpans), for
	// make chaos (qleet's --lock-span-log). Default nil: none.
	LockSpans io.Writer
	// Traces is this process's recent-span buffer, served at GET /v1/<kind>/{id}/trace (see package
	// telemetry/tracing). Nil: that route answers that tracing is off.
	Traces server.TraceSource
}

func (c *Config) applyDefaults() error {
	switch c.MetricsAuth {
	case "":
		c.MetricsAuth = "auto"
	case "auto", "on", "off":
	default:
		return fmt.Errorf("metrics auth: %q is not auto, on or off", c.MetricsAuth)
	}
	if c.DataDir == "" {
		c.DataDir = ".qleet"
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	c.DataDir = abs
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.ChartDir == "" {
		c.ChartDir = filepath.Join(c.DataDir, "charts")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if !c.API && !c.Controllers {
		return errors.New("nothing to run: enable the API, the controllers, or both")
	}
	if c.Controllers && !c.API && (c.APIEndpoint == "" || c.ControllerToken == "") {
		return errors.New("controller-only mode needs --api-endpoint and --token (a controller token)")
	}
	return nil
}

// App is a running control plane.
type App struct {
	cfg Config
	log *slog.Logger
	// Endpoint is the API's base URL, e.g. http://127.0.0.1:8080.
	Endpoint string
	// HealthEndpoint is the base URL of controller-only mode's probes, when Config.HealthListen is set.
	HealthEndpoint string
	// AdminToken is the admin bearer token (all-in-one and API modes).
	AdminToken string
	// AdminTokenPath is where the admin token is written.
	AdminTokenPath string
	// CACertPath is the certificate clients should trust when the API serves TLS.
	CACertPath string
	// Store is the database (API mode).
	Store store.Store
	// Broker is the NATS connection.
	Broker *broker.Broker
	// Registry holds the Prometheus metrics.
	Registry *prometheus.Registry

	relay *broker.Relay
	// conn connects the controllers to clusters, when they run here.
	conn *kube.Connector
	// reconcileMetrics are the controllers' metrics, when they run.
	reconcileMetrics *reconcile.Metrics
	httpSrv          *http.Server
	ln               net.Listener
	cancel           context.CancelFunc
	wg               sync.WaitGroup
	errMu            sync.Mutex
	runErr           error
	failed           chan struct{} // closed by the first part that fails
	started          atomic.Bool   // every part is running
	closers          []func(context.Context)
	ctrlStop         []func()
}

// Start brings the control plane up and returns once it serves. Stop it with Close.
func Start(ctx context.Context, cfg Config) (*App, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil { // one made by an older release may be 0755
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	// client-go logs through klog; send it to our logger instead of stderr.
	klog.SetSlogLogger(cfg.Logger.With("component", "client-go"))
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &App{cfg: cfg, log: cfg.Logger, cancel: cancel, Registry: prometheus.NewRegistry(), failed: make(chan struct{})}
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ok := false
	defer func() {
		if !ok {
			a.Close(context.Background())
		}
	}()

	b, err := broker.Start(ctx, broker.Config{URL: cfg.NATSURL, Replicas: cfg.NATSReplicas, DataDir: filepath.Join(cfg.DataDir, "nats"), Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	a.Broker = b
	a.closers = append(a.closers, func(context.Context) { b.Close() })

	endpoint, ctrlToken := cfg.APIEndpoint, cfg.ControllerToken
	a.CACertPath = cfg.APICACertFile
	if cfg.API {
		if err := a.startAPI(ctx, runCtx); err != nil {
			return nil, err
		}
		endpoint = a.Endpoint
		if ctrlToken, err = a.ensureToken(ctx, "controller.token", "controller", server.RoleController); err != nil {
			return nil, err
		}
	}
	if cfg.Controllers {
		if err := a.startControllers(runCtx, endpoint, ctrlToken); err != nil {
			return nil, err
		}
		if !cfg.API && cfg.HealthListen != "" {
			if err := a.startHealth(runCtx); err != nil {
				return nil, err
			}
		}
	}
	ok = true
	a.started.Store(true)
	return a, nil
}

// Run serves until ctx ends or a part (API server, relay, a controller, the broker connection) fails,
// then stops every part. It returns the failed part's error, or nil after ctx ends.
func (a *App) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-a.failed:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	a.Close(sctx)
	return a.Err()
}

// ready is the control plane's readiness beyond the store: every part started, none failed, and the
// broker connected (the relay and the controllers need it).
func (a *App) ready(context.Context) error {
	if err := a.Err(); err != nil {
		return fmt.Errorf("a part failed: %w", err)
	}
	if !a.started.Load() {
		return errors.New("starting")
	}
	if a.Broker == nil || !a.Broker.Conn().IsConnected() {
		return errors.New("broker: not connected")
	}
	return nil
}

func (a *App) startAPI(ctx, runCtx context.Context) error {
	url := a.cfg.DatabaseURL
	if url == "" {
		url = filepath.Join(a.cfg.DataDir, "qleet.db")
	}
	var st store.Store
	err := a.whileStoreUnavailable(ctx, "open", func() (err error) {
		st, err = store.Open(ctx, store.Config{URL: url, Logger: a.log})
		return err
	})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	a.Store = st
	a.closers = append(a.closers, func(context.Context) { _ = st.Close() })

	if a.AdminToken, err = a.ensureToken(ctx, "admin.token", "admin", server.RoleAdmin); err != nil {
		return err
	}
	a.AdminTokenPath = filepath.Join(a.cfg.DataDir, "admin.token")

	a.relay = broker.NewRelay(a.Broker, st, broker.RelayConfig{Logger: a.log})
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := a.relay.Run(runCtx); err != nil && runCtx.Err() == nil {
			a.fail(fmt.Errorf("outbox relay: %w", err))
		}
	}()

	keys, err := a.secretKeys()
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{Store: st, Logger: a.log, Registry: a.Registry, OnCommit: a.relay.Notify, SecretKeys: keys, Traces: a.cfg.Traces,
		ChartDir: a.cfg.ChartDir, MaxReplicasPerRole: replicaLimits(a.cfg.MaxReplicasPerRole),
		MetricsAuth: a.cfg.MetricsAuth == "on" || a.cfg.MetricsAuth != "off" && needsTLS(a.cfg.Listen), Ready: a.ready})
	if err != nil {
		return fmt.Errorf("api server: %w", err)
	}
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.Listen, err)
	}
	a.Endpoint = "http://" + endpointAddr(ln.Addr())
	a.httpSrv = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	a.httpSrv.RegisterOnShutdown(srv.CloseWatches) // the web view's live streams end at once
	if a.cfg.TLSCertFile != "" || needsTLS(a.cfg.Listen) {
		tc, err := a.tlsConfig()
		if err != nil {
			_ = ln.Close()
			return err
		}
		a.httpSrv.TLSConfig = tc
		ln = tls.NewListener(ln, tc)
		a.Endpoint = "https://" + endpointAddr(ln.Addr())
	}
	a.ln = ln
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := a.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.fail(fmt.Errorf("api server: %w", err))
		}
	}()
	return nil
}

// ensureToken returns the token stored in <DataDir>/<file>, minting and registering one on first start,
// or when the store does not know the stored one. The file is written with mode 0600. A database that
// does not answer is waited for (whileStoreUnavailable): it never mints a new token.
func (a *App) ensureToken(ctx context.Context, file, name, role string) (string, error) {
	path := filepath.Join(a.cfg.DataDir, file)
	if data, err := os.ReadFile(path); err == nil {
		tok := strings.TrimSpace(string(data))
		err := a.whileStoreUnavailable(ctx, "look up the "+name+" token", func() error {
			_, err := a.Store.GetToken(ctx, server.HashToken(tok))
			return err
		})
		switch {
		case err == nil:
			return tok, nil
		case !errors.Is(err, store.ErrNotFound):
			return "", fmt.Errorf("look up %s token: %w", name, err)
		}
	}
	tok, err := server.NewToken()
	if err != nil {
		return "", err
	}
	err = a.whileStoreUnavailable(ctx, "register the "+name+" token", func() error {
		err := a.Store.CreateToken(ctx, &store.Token{Hash: server.HashToken(tok), Name: name, Role: role})
		if errors.Is(err, store.ErrNameTaken) {
			// An attempt the database committed before its connection broke.
			if _, gerr := a.Store.GetToken(ctx, server.HashToken(tok)); gerr == nil {
				return nil
			}
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("register %s token: %w", name, err)
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return tok, nil
}

// storeStartWait bounds how long a starting API waits for a database that does not answer.
const storeStartWait = time.Minute

// whileStoreUnavailable runs step until it succeeds, fails for another reason than a database that does
// not answer (store.Unavailable), or storeStartWait has passed: an API replica started while PostgreSQL
// restarts waits for it instead of exiting (make chaos saw one exit).
func (a *App) whileStoreUnavailable(ctx context.Context, what string, step func() error) error {
	return a.retryWhile(ctx, what, store.Unavailable, storeStartWait, step)
}

// retryWhile runs step until it succeeds, fails with an error that transient does not accept, ctx ends,
// or limit has passed (0: no limit). It pauses between attempts, from 250ms doubling up to 5s, and logs
// each retried failure. It returns step's last error.
func (a *App) retryWhile(ctx context.Context, what string, transient func(error) bool, limit time.Duration, step func() error) error {
	var deadline time.Time
	if limit > 0 {
		deadline = time.Now().Add(limit)
	}
	pause := 250 * time.Millisecond
	for {
		err := step()
		if err == nil || !transient(err) || ctx.Err() != nil || !deadline.IsZero() && time.Now().Add(pause).After(deadline) {
			return err
		}
		a.log.Warn("no answer; trying again", "step", what, "after", pause, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// ReconcilesFinished is how many reconciles of kind this process's controllers have finished (0 when they
// do not run here), read without a metrics scrape.
func (a *App) ReconcilesFinished(kind string) int64 { return a.reconcileMetrics.Finished(kind) }

// ClusterRequests returns how many requests this process's controllers and agents made to clusters so
// far, watches apart (zero when the controllers do not run here). At rest only watches are made.
func (a *App) ClusterRequests() kube.RequestCounts {
	if a.conn == nil {
		return kube.RequestCounts{}
	}
	return a.conn.Requests()
}

// DataDir returns the absolute data directory.
func (a *App) DataDir() string { return a.cfg.DataDir }

// Client returns an admin client for this control plane.
func (a *App) Client() (*client.Client, error) {
	opts := []client.Option{client.WithToken(a.AdminToken)}
	if a.CACertPath != "" {
		pemData, err := os.ReadFile(a.CACertPath)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithCACert(pemData))
	}
	return client.New(a.Endpoint, opts...)
}

// DefaultWorkers is the default of Config.Workers.
const DefaultWorkers = 16

func (a *App) controllerConfig() reconcile.Config {
	workers := a.cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	return reconcile.Config{
		Workers: workers, ResyncInterval: a.cfg.ResyncInterval, DriftInterval: a.cfg.DriftInterval,
		FailedRecheckInterval: a.cfg.FailedRecheckInterval, OwnerGrace: a.cfg.OwnerGrace, Logger: a.log,
		LockSpans: a.cfg.LockSpans, Activity: &reconcile.Activity{},
	}
}

// appliedOwnerKinds are the kinds whose controllers apply objects to clusters: an applied object that
// does not name its owner's kind (applied before objects carried kube.LabelOwnerKind, or by an owner
// that does not say it) notifies each of them, and the controllers of the others find no such object.
var appliedOwnerKinds = []string{api.KindWorkloadInstance, api.KindGateway, api.KindSupportService, api.KindDatabase, api.KindBucket}

// ownedChanges turns the clusters' watch events about applied objects (kube.ConnectorConfig's
// OnOwnedChange) into notifications of exactly their owners, published straight to the broker like a
// requeue: a drift (an object edited or deleted by hand) is put back within the window plus one
// reconcile, without any sweep. Events of one owner within the window are coalesced into one
// notification.
type ownedChanges struct {
	ctx   context.Context
	queue interface {
		Publish(ctx context.Context, kind, id, msgID string) error
	}
	log    *slog.Logger
	window time.Duration

	mu      sync.Mutex
	pending map[string]bool // "kind\x00id" -> scheduled
}

// changed schedules the owner's notification, unless one is already scheduled.
func (o *ownedChanges) changed(kind, id string) {
	key := kind + "\x00" + id
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending[key] {
		return
	}
	o.pending[key] = true
	time.AfterFunc(o.window, func() {
		o.mu.Lock()
		delete(o.pending, key)
		o.mu.Unlock()
		kinds := []string{kind}
		if kind == "" {
			kinds = appliedOwnerKinds
		}
		for _, k := range kinds {
			if err := o.queue.Publish(o.ctx, k, id, ""); err != nil && o.ctx.Err() == nil {
				o.log.Warn("notify the owner of a changed object; the resync will find the drift", "kind", k, "id", id, "err", err)
			}
		}
	})
}

func (a *App) fail(err error) {
	a.log.Error("control plane part failed", "err", err)
	a.errMu.Lock()
	if a.runErr == nil {
		a.runErr = err
		close(a.failed)
	}
	a.errMu.Unlock()
}

// Err returns the first error of a part that stopped unexpectedly, if any.
func (a *App) Err() error {
	a.errMu.Lock()
	defer a.errMu.Unlock()
	return a.runErr
}

// Close stops every part: controllers first (letting in-flight reconciles finish), then the API, the
// relay, the broker and the store.
func (a *App) Close(ctx context.Context) {
	for _, stop := range a.ctrlStop {
		stop()
	}
	if a.httpSrv != nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = a.httpSrv.Shutdown(sctx)
		cancel()
	}
	a.cancel()
	a.wg.Wait()
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i](ctx)
	}
}

// endpointAddr is the address clients on this host use: a wildcard listen address becomes loopback.
func endpointAddr(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
}

// secretKeys loads the key ring that seals secrets at rest (server.ParseSecretKeys: the first key seals),
// making one key on first start.
func (a *App) secretKeys() ([][]byte, error) {
	path := a.cfg.SecretKeyFile
	if path == "" {
		path = filepath.Join(a.cfg.DataDir, "secret.key")
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) && a.cfg.SecretKeyFile == "" {
		key, err := server.NewSecretKey()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, server.FormatSecretKeys([][]byte{key}), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		return [][]byte{key}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	keys, err := server.ParseSecretKeys(data)
	if err != nil {
		return nil, fmt.Errorf("secret key %s: %w", path, err)
	}
	return keys, nil
}

// replicaLimits converts per-role replica limits to the server's type, clamping values it would refuse
// anyway (the server names the bad one); nil for none.
func replicaLimits(m map[string]int) map[string]int32 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int32, len(m))
	for role, n := range m {
		out[role] = int32(max(min(n, math.MaxInt32), math.MinInt32))
	}
	return out
}
