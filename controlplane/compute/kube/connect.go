// Package kube talks to Kubernetes clusters in the compute space through client-go: connecting to a
// runtime, server-side apply with ownership labels, pruning, and reading the health of applied objects.
package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is a connection to one runtime's Kubernetes API.
type Cluster struct {
	// Config is the REST config.
	Config *rest.Config
	// Clientset is the typed client.
	Clientset kubernetes.Interface
	// Dynamic is the dynamic client, for objects of any kind.
	Dynamic dynamic.Interface
	// Mapper maps kinds to resources; Reset it when CRDs appear.
	Mapper meta.ResettableRESTMapper
	// ApplyConcurrency bounds the Apply calls in flight to this cluster at once, whoever makes them
	// (default DefaultApplyConcurrency). Set it before the first Apply.
	ApplyConcurrency int

	slotsOnce  sync.Once
	applySlots chan struct{}

	cacheOnce sync.Once
	cache     *Cache
	// onOwnedChange is the connector's OnOwnedChange, set before the cache is made.
	onOwnedChange func(kind, id string)
	// requests counts what this cluster's clients sent.
	requests *requestCounter
	// present holds the objects an apply found present without the cache holding them (see absent.go).
	present presentRefs
	// owned shares the lists of owned objects that owners make at once (see ownedlists.go).
	owned ownedLists

	reach *reachability
}

// ConnectorConfig configures a Connector.
type ConnectorConfig struct {
	// LocalDir holds the local runtimes' data, one directory per runtime id with a kubeconfig inside
	// (<LocalDir>/<id>/kubeconfig). Required for local runtimes.
	LocalDir string
	// Timeout bounds each request to a cluster (default 15s), watches excepted. Calls to a cluster whose
	// probe fails are refused at once, and those under way are cancelled, rather than waiting it out.
	Timeout time.Duration
	// ProbeInterval says when a connected cluster's API server is asked for its version, so that an
	// outage (down, or a hung server that accepts connections and never answers) is known within
	// seconds (default DefaultProbeInterval; negative: never). A cluster that answers is not probed on a
	// timer: a probe runs when there is a reason to doubt it, namely a request or watch that fails at
	// the transport, a request that has not answered within ProbeInterval, or an idle watch connection
	// that stops answering HTTP/2 pings (see http2Keepalive). While it does not answer it is probed
	// every ProbeInterval, until it does. At rest, then, it costs no request.
	ProbeInterval time.Duration
	// ProbeTimeout bounds each probe (default DefaultProbeTimeout): a server that fails two probes in a
	// row (the second a second after the first) is unreachable.
	ProbeTimeout time.Duration
	// OnReachability, when set, is called when a probed cluster stops answering (err says why) or answers
	// again (nil), once per runtime connected to it. It runs on the prober's goroutine: keep it short.
	OnReachability func(runtimeID string, err error)
	// QPS and Burst are a client-side rate limit per cluster. The default (QPS 0) is none: the API
	// server's Priority and Fairness (on by default since Kubernetes 1.20, GA in 1.29) queues and sheds
	// load fairly across clients, as SIG API Machinery advises and controller-runtime does since v0.21.
	// A token bucket on this side only made QleetOS wait on itself: deleting 100 instances at once
	// (eighteen lists each, to prove a namespace holds nothing it did not create) queued 2,100 requests
	// behind 100 per second. A positive QPS sets one; Burst defaults to twice QPS.
	QPS   float32
	Burst int
	// ApplyConcurrency is each Cluster's ApplyConcurrency (default DefaultApplyConcurrency).
	ApplyConcurrency int
	// OnOwnedChange, when set, is called when a cluster's watch sees an object QleetOS applied edited
	// (its spec, labels or annotations; not its status) or deleted, by anyone: kind and id name the
	// object's owner (LabelOwnerKind, empty when the owner did not say its kind, and LabelInstanceID).
	// Changes made while a watch was down arrive when it resumes. A kind is watched once something
	// applied or read it through the cluster's cache. It runs on the watch's goroutine: keep it short.
	OnOwnedChange func(kind, id string)
	// OnCluster, when set, is called once for each cluster the connector opens, with the runtime that
	// opened it, after it is stored: the in-process agent starts there, and stops when the cluster's
	// Done closes (no runtime uses it any more, or the connector closes). Keep it short.
	OnCluster func(cl *Cluster, rt *api.KubernetesRuntime)
	// Sources connect to the runtimes of providers that no kubeconfig describes, by provider name (e.g.
	// "eks": an endpoint and tokens from the cloud). A source is called once per runtime until Forget.
	Sources map[string]RESTConfigSource
}

// RESTConfigSource makes the REST config of a runtime's cluster.
type RESTConfigSource func(ctx context.Context, rt *api.KubernetesRuntime) (*rest.Config, error)

// Connector opens and caches connections to runtimes. Runtimes with the same kubeconfig and context
// share one Cluster, and so one Cache. It is safe for concurrent use.
type Connector struct {
	cfg       ConnectorConfig
	mu        sync.Mutex
	byKey     map[string]*Cluster // connection details hash -> cluster
	byRuntime map[string]string   // runtime id -> connection details hash
	// retired sums the requests of the clusters closed so far (Requests).
	retired RequestCounts
}

// NewConnector returns a Connector with defaults applied.
func NewConnector(cfg ConnectorConfig) *Connector {
	if cfg.Timeout == 0 {
		cfg.Timeout = 15 * time.Second
	}
	if cfg.QPS <= 0 {
		cfg.QPS, cfg.Burst = -1, 0 // client-go: a negative QPS makes no rate limiter
	} else if cfg.Burst <= 0 {
		cfg.Burst = max(1, int(2*cfg.QPS))
	}
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	return &Connector{cfg: cfg, byKey: map[string]*Cluster{}, byRuntime: map[string]string{}}
}

// LocalKubeconfigPath is where a local runtime's kubeconfig lives.
func (c *Connector) LocalKubeconfigPath(runtimeID string) string {
	return filepath.Join(c.cfg.LocalDir, runtimeID, "kubeconfig")
}

// Connect returns a connection to the runtime's cluster, reusing a cached one while the runtime's
// connection details are unchanged. It does not contact the cluster.
func (c *Connector) Connect(ctx context.Context, rt *api.KubernetesRuntime) (*Cluster, error) {
	if src := c.cfg.Sources[rt.Spec.Provider]; src != nil {
		return c.connectSource(ctx, rt, src)
	}
	raw, err := c.kubeconfig(rt)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append(raw, []byte("\x00"+rt.Spec.Context)...))
	key := hex.EncodeToString(sum[:])
	c.mu.Lock()
	if cl, ok := c.byKey[key]; ok {
		old := c.byRuntime[rt.ID]
		c.byRuntime[rt.ID] = key
		c.dropUnusedLocked(old)
		c.mu.Unlock()
		return cl, nil
	}
	c.mu.Unlock()
	cl, err := c.open(raw, rt.Spec.Context, key)
	if err != nil {
		return nil, fmt.Errorf("kubernetes_runtime %q: %w", rt.Name, err)
	}
	return c.keep(rt, key, cl), nil
}

// keep stores a newly opened cluster under key for rt, unless one was opened concurrently (then that
// one is kept and cl closed), and tells OnCluster about a cluster it keeps.
func (c *Connector) keep(rt *api.KubernetesRuntime, key string, cl *Cluster) *Cluster {
	c.mu.Lock()
	kept := true
	if existing, ok := c.byKey[key]; ok { // opened concurrently
		cl.Close()
		cl, kept = existing, false
	}
	c.byKey[key] = cl
	old := c.byRuntime[rt.ID]
	c.byRuntime[rt.ID] = key
	if old != key {
		c.dropUnusedLocked(old)
	}
	c.mu.Unlock()
	if kept && c.cfg.OnCluster != nil {
		c.cfg.OnCluster(cl, rt)
	}
	return cl
}

// connectSource connects through a source, keyed by runtime (and its spec generation).
func (c *Connector) connectSource(ctx context.Context, rt *api.KubernetesRuntime, src RESTConfigSource) (*Cluster, error) {
	key := fmt.Sprintf("source\x00%s\x00%s\x00%d", rt.Spec.Provider, rt.ID, rt.Generation)
	c.mu.Lock()
	if cl, ok := c.byKey[key]; ok {
		old := c.byRuntime[rt.ID]
		c.byRuntime[rt.ID] = key
		if old != key {
			c.dropUnusedLocked(old)
		}
		c.mu.Unlock()
		return cl, nil
	}
	c.mu.Unlock()
	rc, err := src(ctx, rt)
	if err != nil {
		return nil, fmt.Errorf("kubernetes_runtime %q: %w", rt.Name, err)
	}
	rc.Timeout, rc.QPS, rc.Burst, rc.UserAgent = c.cfg.Timeout, c.cfg.QPS, c.cfg.Burst, "qleet-controller"
	cl, err := c.newCluster(rc, key)
	if err != nil {
		return nil, fmt.Errorf("kubernetes_runtime %q: %w", rt.Name, err)
	}
	return c.keep(rt, key, cl), nil
}

// Forget drops the cached connection of a runtime; a cluster no other runtime uses is closed.
func (c *Connector) Forget(runtimeID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.byRuntime[runtimeID]
	if !ok {
		return
	}
	delete(c.byRuntime, runtimeID)
	c.dropUnusedLocked(key)
}

// dropUnusedLocked closes and forgets the cluster of key when no runtime uses it any more.
func (c *Connector) dropUnusedLocked(key string) {
	if key == "" {
		return
	}
	for _, k := range c.byRuntime {
		if k == key {
			return
		}
	}
	if cl, ok := c.byKey[key]; ok {
		c.retire(cl)
		delete(c.byKey, key)
	}
}

// retire closes cl and keeps its request counts.
func (c *Connector) retire(cl *Cluster) {
	cl.Close()
	n := cl.Requests()
	c.retired.Calls += n.Calls
	c.retired.Watches += n.Watches
}

// Close closes every cached cluster (stopping their caches).
func (c *Connector) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, cl := range c.byKey {
		c.retire(cl)
		delete(c.byKey, key)
	}
	clear(c.byRuntime)
}

func (c *Connector) kubeconfig(rt *api.KubernetesRuntime) ([]byte, error) {
	switch rt.Spec.Provider {
	case api.ProviderKubeconfig:
		if rt.Spec.Kubeconfig == "" {
			return nil, fmt.Errorf("kubernetes_runtime %q: spec.kubeconfig is empty (is this token allowed to read write-only fields?)", rt.Name)
		}
		return []byte(rt.Spec.Kubeconfig), nil
	case api.ProviderLocal:
		if c.cfg.LocalDir == "" {
			return nil, fmt.Errorf("kubernetes_runtime %q: local runtimes are not served by this controller (no local dir)", rt.Name)
		}
		data, err := os.ReadFile(c.LocalKubeconfigPath(rt.ID))
		if err != nil {
			return nil, fmt.Errorf("kubernetes_runtime %q: local cluster kubeconfig: %w", rt.Name, err)
		}
		return data, nil
	default:
		return nil, fmt.Errorf("kubernetes_runtime %q: provider %q is not supported by this controller", rt.Name, rt.Spec.Provider)
	}
}

// RESTConfigFromKubeconfig builds a REST config from a kubeconfig document and an optional context.
func RESTConfigFromKubeconfig(raw []byte, kubeContext string) (*rest.Config, error) {
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("parse kubeconfig: %w", err)
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, kubeContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return rc, nil
}

func (c *Connector) open(raw []byte, kubeContext, key string) (*Cluster, error) {
	rc, err := RESTConfigFromKubeconfig(raw, kubeContext)
	if err != nil {
		return nil, err
	}
	rc.Timeout = c.cfg.Timeout
	rc.QPS = c.cfg.QPS
	rc.Burst = c.cfg.Burst
	rc.UserAgent = "qleet-controller"
	return c.newCluster(rc, key)
}

// newCluster is NewCluster with the connector's per-cluster settings; it starts probing the cluster,
// which Close stops.
func (c *Connector) newCluster(rc *rest.Config, key string) (*Cluster, error) {
	cl, err := NewCluster(rc)
	if err != nil {
		return nil, err
	}
	cl.ApplyConcurrency = c.cfg.ApplyConcurrency
	cl.onOwnedChange = c.cfg.OnOwnedChange
	cl.reach.timeout = c.cfg.ProbeTimeout
	if c.cfg.ProbeInterval > 0 {
		cl.reach.slowAfter = c.cfg.ProbeInterval
	}
	if c.cfg.ProbeInterval > 0 {
		// Close stops the probes with the cache.
		go cl.monitor(c.cfg.ProbeInterval, cl.Cache().stop, func(err error) { c.reachabilityChanged(key, err) })
	}
	return cl, nil
}

// reachabilityChanged tells OnReachability about every runtime connected to the cluster of key.
func (c *Connector) reachabilityChanged(key string, err error) {
	if c.cfg.OnReachability == nil {
		return
	}
	c.mu.Lock()
	var ids []string
	for id, k := range c.byRuntime {
		if k == key {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.cfg.OnReachability(id, err)
	}
}

// http2Keepalive is how client-go's HTTP/2 connections to clusters check that an idle connection still
// answers: after readIdle seconds without a frame they send a PING, and close the connection when no
// answer comes within ping seconds. A watch on such a connection then fails, which makes the cluster's
// monitor probe it: this is how a hung API server is noticed at rest without any request (client-go's
// defaults, 30s and 15s, would take most of a minute). Set through client-go's environment variables
// (HTTP2_READ_IDLE_TIMEOUT_SECONDS, HTTP2_PING_TIMEOUT_SECONDS), unless the process's environment
// sets them, before any transport is made.
var http2Keepalive = struct{ readIdle, ping string }{readIdle: "4", ping: "2"}

func init() {
	for k, v := range map[string]string{"HTTP2_READ_IDLE_TIMEOUT_SECONDS": http2Keepalive.readIdle, "HTTP2_PING_TIMEOUT_SECONDS": http2Keepalive.ping} {
		if _, set := os.LookupEnv(k); !set {
			_ = os.Setenv(k, v)
		}
	}
}

// NewCluster builds the clients of a Cluster from a REST config.
func NewCluster(rc *rest.Config) (*Cluster, error) {
	rc = rest.CopyConfig(rc)
	reach := &reachability{host: rc.Host, kick: make(chan struct{}, 1)}
	counter := &requestCounter{}
	// The request timeout is the guard's, which leaves watches alone: as the http.Client's timeout it
	// cut every watch after 15s, and the informers opened them again, four times a minute per kind.
	timeout := rc.Timeout
	rc.Timeout = 0
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: counter} })
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return guardTransport{next: rt, reach: reach, timeout: timeout}
	})
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return tracingTransport{next: rt} })
	// The typed client (and the cache's informers built on it) speaks protobuf: decoding watch and list
	// streams of thousands of objects is the largest CPU cost of a cache refill (make bench, scale
	// section, full resync). The dynamic client stays on JSON, which every kind speaks.
	pc := rest.CopyConfig(rc)
	pc.ContentType = "application/vnd.kubernetes.protobuf"
	pc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(pc)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return &Cluster{Config: rc, Clientset: cs, Dynamic: dyn, Mapper: mapper, reach: reach, requests: counter}, nil
}

// ErrUnreachable says a cluster's API server does not answer: its last probe failed or timed out (a
// server that accepts connections and never answers included). Calls to the cluster fail at once with
// it, wrapped in an *UnreachableError, until a probe succeeds again. Transient treats it as transient.
var ErrUnreachable = errors.New("the Kubernetes API server does not answer")

// UnreachableError is a call refused at once because the cluster is known not to answer.
type UnreachableError struct {
	// Host is the API server's address.
	Host string
	// Since is when its probe first failed.
	Since time.Time
	// Cause is the error of the probe that failed.
	Cause error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s: %v since %s (%v)", e.Host, ErrUnreachable, e.Since.UTC().Format(time.RFC3339), e.Cause)
}

// Unwrap returns ErrUnreachable and the probe's error.
func (e *UnreachableError) Unwrap() []error { return []error{ErrUnreachable, e.Cause} }

// Default probe settings; see ConnectorConfig.
const (
	DefaultProbeInterval = 5 * time.Second
	DefaultProbeTimeout  = 3 * time.Second
)

// reachability is what a cluster's probes found, shared by its transport guard.
type reachability struct {
	host    string
	timeout time.Duration // bounds each probe
	// slowAfter is how long a request may go unanswered before the cluster is doubted (0: never).
	slowAfter time.Duration
	// kick wakes the monitor to probe: something made the cluster doubtful.
	kick chan struct{}

	mu       sync.Mutex
	down     *UnreachableError           // nil while the cluster answers (or before the first probe)
	fails    int                         // probes failed in a row
	inflight map[*int]context.CancelFunc // calls under way, cancelled when the cluster stops answering
}

// probeFailures is how many probes in a row must fail for a cluster to be unreachable: one slow answer
// from a busy API server is not an outage. The monitor probes again a second after a failure.
const probeFailures = 2

// probeRetry is how soon the monitor probes again after a failed probe.
const probeRetry = time.Second

// suspect asks the monitor (if any) for a probe soon.
func (r *reachability) suspect() {
	if r.kick == nil {
		return
	}
	select {
	case r.kick <- struct{}{}:
	default: // a probe is already asked for
	}
}

// err returns the cluster's unreachability, or nil.
func (r *reachability) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down == nil {
		return nil
	}
	return r.down
}

// record notes a probe's result. It reports whether the cluster's reachability changed: it stopped
// answering (probeFailures probes in a row failed; calls under way are cancelled then: they would only
// wait out their timeout), or answers again.
func (r *reachability) record(err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.fails = 0
	} else {
		r.fails++
	}
	switch {
	case err == nil && r.down != nil:
		r.down = nil
		return true
	case err != nil && r.down == nil && r.fails >= probeFailures:
		r.down = &UnreachableError{Host: r.host, Since: time.Now(), Cause: err}
		for k, cancel := range r.inflight {
			cancel()
			delete(r.inflight, k)
		}
		return true
	case err != nil && r.down != nil:
		r.down.Cause = err
	}
	return false
}

// track registers a call's cancel; the returned func deregisters it.
func (r *reachability) track(cancel context.CancelFunc) func() {
	k := new(int)
	r.mu.Lock()
	if r.inflight == nil {
		r.inflight = map[*int]context.CancelFunc{}
	}
	r.inflight[k] = cancel
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.inflight, k)
		r.mu.Unlock()
		cancel()
	}
}

// probeKey marks a probe's request, which the guard lets through.
type probeKey struct{}

// guardTransport fails calls to a cluster known not to answer at once, and cancels the calls under way
// when its probe finds that it stopped answering, so that no reconcile waits out a request timeout per
// call on a hung API server.
type guardTransport struct {
	next  http.RoundTripper
	reach *reachability
	// timeout bounds each request but watches, until its body is closed (0: none).
	timeout time.Duration
}

// RoundTrip sends req unless the cluster is known not to answer.
func (g guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Value(probeKey{}) != nil {
		return g.next.RoundTrip(req)
	}
	if err := g.reach.err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	if g.timeout > 0 && !isWatch(req) {
		ctx, cancel = context.WithTimeout(req.Context(), g.timeout)
	}
	done := g.reach.track(cancel)
	var slow *time.Timer
	if g.reach.slowAfter > 0 {
		slow = time.AfterFunc(g.reach.slowAfter, g.reach.suspect) // no answer yet: is it hung?
	}
	resp, err := g.next.RoundTrip(req.WithContext(ctx))
	if slow != nil {
		slow.Stop()
	}
	if err != nil {
		done()
		if ctx.Err() == nil {
			g.reach.suspect() // refused, reset, unresolvable: is it down?
		}
		if down := g.reach.err(); down != nil && ctx.Err() != nil && req.Context().Err() == nil {
			return nil, fmt.Errorf("%w: %w", down, err) // cancelled because the probe found the cluster down
		}
		return nil, err
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, done: done, ctx: ctx, failed: g.reach.suspect}
	return resp, nil
}

// doneBody calls done when the response body is closed (a watch's body stays open for its life), and
// failed when reading it fails for another reason than its end or its request's cancellation: the
// connection broke under a watch.
type doneBody struct {
	io.ReadCloser
	once   sync.Once
	done   func()
	ctx    context.Context
	failed func()
}

// Read reads the body, reporting a broken connection.
func (b *doneBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && b.ctx.Err() == nil {
		b.failed()
	}
	return n, err
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// Probe asks the cluster's API server for its version within the probe timeout (default
// DefaultProbeTimeout), whatever earlier probes found, and records the answer: a cluster whose probes
// fail (twice in a row) is unreachable (Reachable), and calls to it fail at once with ErrUnreachable,
// until a probe succeeds. A server that accepts connections and never answers fails it at the timeout.
func (cl *Cluster) Probe(ctx context.Context) (*version.Info, error) {
	info, err := cl.probe(ctx)
	cl.reach.record(err)
	return info, err
}

func (cl *Cluster) probe(ctx context.Context) (*version.Info, error) {
	timeout := cl.reach.timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, probeKey{}, true), timeout)
	defer cancel()
	body, err := cl.Clientset.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: no answer within %s: %w", cl.Config.Host, timeout, err)
		}
		if strings.Contains(err.Error(), "client connection lost") {
			// The connection was closed because it stopped answering pings (http2Keepalive).
			return nil, fmt.Errorf("%s: no answer within %ss to a ping on its connection: %w", cl.Config.Host, http2Keepalive.ping, err)
		}
		return nil, fmt.Errorf("%s: %w", cl.Config.Host, err)
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("%s: decode /version: %w", cl.Config.Host, err)
	}
	return &info, nil
}

// Reachable returns nil while the cluster answers (as far as its last probe knows), else an
// *UnreachableError saying since when it does not.
func (cl *Cluster) Reachable() error { return cl.reach.err() }

// monitor probes the cluster when it is doubted (reachability.suspect) until stop is closed, and calls
// changed on every change of its reachability (nil: it answers again). A failed probe is repeated a
// second later, then every interval while the cluster does not answer; once it answers, the monitor
// waits for the next doubt. A cluster that answers is never probed on a timer; it is probed once when
// the connection opens.
func (cl *Cluster) monitor(interval time.Duration, stop <-chan struct{}, changed func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	t := time.NewTimer(0)
	if !t.Stop() {
		<-t.C
	}
	defer t.Stop()
	armed := false     // the timer runs: the cluster did not answer its last probe
	cl.reach.suspect() // one probe when the connection opens: nothing is known of the cluster yet
	for {
		select {
		case <-stop:
			return
		case <-cl.reach.kick:
		case <-t.C:
			armed = false
		}
		_, err := cl.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		if cl.reach.record(err) && changed != nil {
			changed(cl.Reachable())
		}
		if err == nil {
			if armed && !t.Stop() {
				<-t.C
			}
			armed = false
			continue
		}
		next := interval
		if cl.Reachable() == nil {
			next = min(probeRetry, interval) // make sure, soon
		}
		if armed && !t.Stop() {
			<-t.C
		}
		t.Reset(next)
		armed = true
	}
}
