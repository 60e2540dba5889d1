// Package kube talks to Kubernetes clusters in the compute space through client-go: connecting to a
// runtime, server-side apply with ownership labels, pruning, and reading the health of applied objects.
package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/client"
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
}

// ConnectorConfig configures a Connector.
type ConnectorConfig struct {
	// LocalDir holds the local runtimes' data, one directory per runtime id with a kubeconfig inside
	// (<LocalDir>/<id>/kubeconfig). Required for local runtimes.
	LocalDir string
	// Timeout bounds each request to a cluster (default 15s).
	Timeout time.Duration
	// QPS and Burst are client-side rate limits (defaults 100 and 200).
	QPS   float32
	Burst int
	// ApplyConcurrency is each Cluster's ApplyConcurrency (default DefaultApplyConcurrency).
	ApplyConcurrency int
	// Sources connect to the runtimes of providers that no kubeconfig describes, by provider name (e.g.
	// "eks": an endpoint and tokens from the cloud). A source is called once per runtime until Forget.
	Sources map[string]RESTConfigSource
}

// RESTConfigSource makes the REST config of a runtime's cluster.
type RESTConfigSource func(ctx context.Context, rt *client.KubernetesRuntime) (*rest.Config, error)

// Connector opens and caches connections to runtimes. Runtimes with the same kubeconfig and context
// share one Cluster, and so one Cache. It is safe for concurrent use.
type Connector struct {
	cfg       ConnectorConfig
	mu        sync.Mutex
	byKey     map[string]*Cluster // connection details hash -> cluster
	byRuntime map[string]string   // runtime id -> connection details hash
}

// NewConnector returns a Connector with defaults applied.
func NewConnector(cfg ConnectorConfig) *Connector {
	if cfg.Timeout == 0 {
		cfg.Timeout = 15 * time.Second
	}
	if cfg.QPS == 0 {
		cfg.QPS = 100
	}
	if cfg.Burst == 0 {
		cfg.Burst = 200
	}
	return &Connector{cfg: cfg, byKey: map[string]*Cluster{}, byRuntime: map[string]string{}}
}

// LocalKubeconfigPath is where a local runtime's kubeconfig lives.
func (c *Connector) LocalKubeconfigPath(runtimeID string) string {
	return filepath.Join(c.cfg.LocalDir, runtimeID, "kubeconfig")
}

// Connect returns a connection to the runtime's cluster, reusing a cached one while the runtime's
// connection details are unchanged. It does not contact the cluster.
func (c *Connector) Connect(ctx context.Context, rt *client.KubernetesRuntime) (*Cluster, error) {
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
	cl, err := c.open(raw, rt.Spec.Context)
	if err != nil {
		return nil, fmt.Errorf("kubernetes_runtime %q: %w", rt.Name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if existing, ok := c.byKey[key]; ok { // opened concurrently
		cl = existing
	}
	c.byKey[key] = cl
	old := c.byRuntime[rt.ID]
	c.byRuntime[rt.ID] = key
	c.dropUnusedLocked(old)
	return cl, nil
}

// connectSource connects through a source, keyed by runtime (and its spec generation).
func (c *Connector) connectSource(ctx context.Context, rt *client.KubernetesRuntime, src RESTConfigSource) (*Cluster, error) {
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
	cl, err := c.newCluster(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes_runtime %q: %w", rt.Name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if existing, ok := c.byKey[key]; ok {
		cl = existing
	}
	c.byKey[key] = cl
	old := c.byRuntime[rt.ID]
	c.byRuntime[rt.ID] = key
	if old != key {
		c.dropUnusedLocked(old)
	}
	return cl, nil
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
		cl.Close()
		delete(c.byKey, key)
	}
}

// Close closes every cached cluster (stopping their caches).
func (c *Connector) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, cl := range c.byKey {
		cl.Close()
		delete(c.byKey, key)
	}
	clear(c.byRuntime)
}

func (c *Connector) kubeconfig(rt *client.KubernetesRuntime) ([]byte, error) {
	switch rt.Spec.Provider {
	case client.ProviderKubeconfig:
		if rt.Spec.Kubeconfig == "" {
			return nil, fmt.Errorf("kubernetes_runtime %q: spec.kubeconfig is empty (is this token allowed to read write-only fields?)", rt.Name)
		}
		return []byte(rt.Spec.Kubeconfig), nil
	case client.ProviderLocal:
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

func (c *Connector) open(raw []byte, kubeContext string) (*Cluster, error) {
	rc, err := RESTConfigFromKubeconfig(raw, kubeContext)
	if err != nil {
		return nil, err
	}
	rc.Timeout = c.cfg.Timeout
	rc.QPS = c.cfg.QPS
	rc.Burst = c.cfg.Burst
	rc.UserAgent = "qleet-controller"
	return c.newCluster(rc)
}

// newCluster is NewCluster with the connector's per-cluster settings.
func (c *Connector) newCluster(rc *rest.Config) (*Cluster, error) {
	cl, err := NewCluster(rc)
	if err != nil {
		return nil, err
	}
	cl.ApplyConcurrency = c.cfg.ApplyConcurrency
	return cl, nil
}

// NewCluster builds the clients of a Cluster from a REST config.
func NewCluster(rc *rest.Config) (*Cluster, error) {
	rc = rest.CopyConfig(rc)
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
	return &Cluster{Config: rc, Clientset: cs, Dynamic: dyn, Mapper: mapper}, nil
}
