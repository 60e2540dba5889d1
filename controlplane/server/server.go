// Package server is the QleetOS v1 HTTP API: a chi router with one generic set of handlers serving every
// kind registered in package api, strict decoding and validation, bearer-token auth with roles,
// server-side waits, the OpenAPI document, Prometheus metrics and access logs. It reads and writes state
// only through store.Store.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/controlplane/ui"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Store holds the objects. Required.
	Store store.Store
	// Logger receives access logs and errors. Default slog.Default().
	Logger *slog.Logger
	// Registry is the Prometheus registry served at /metrics and shared with the controllers. Default: a
	// new registry.
	Registry *prometheus.Registry
	// MaxBodyBytes bounds request bodies; larger ones get 413. Default 1 MiB.
	MaxBodyBytes int64
	// OnCommit is called after every committed write, so that the outbox relay wakes. May be nil.
	OnCommit func()
	// Ready is an extra readiness check for /readyz, after the store ping. May be nil.
	Ready func(ctx context.Context) error
	// WaitPollInterval is how soon server-side waits first re-read the object, to see writes made through
	// other API replicas (this server's own writes wake waiters at once); the interval doubles while nothing
	// changes, up to 8 times this. Default 500ms.
	WaitPollInterval time.Duration
	// TokenCacheTTL is how long a valid token is remembered. Default 10s.
	TokenCacheTTL time.Duration
	// CascadeTimeout bounds how long a cascading delete waits for dependents to go. Default 5m.
	CascadeTimeout time.Duration
	// MetricsAuth makes /metrics require a bearer token (any role). The control plane turns it on when it
	// listens beyond loopback. Default off.
	MetricsAuth bool
	// Traces is this process's buffer of recent spans, which GET /v1/<kind>/{id}/trace reads. Nil: the
	// route answers that tracing is off here.
	Traces TraceSource
	// MaxReplicasPerRole caps, per token role, the replicas a spec may ask for: a definition's replicas
	// and autoscaling max_replicas, an instance's replicas. A role not listed is held only to
	// api.MaxReplicas. Each limit is between 0 and api.MaxReplicas. Default: none.
	MaxReplicasPerRole map[string]int32
	// ChartDir is the directory the controllers read local Helm charts from. When set, a definition
	// naming a local chart by an absolute path outside it is refused at write time; relative paths that
	// lead out of it are refused whatever this is. Default "": absolute paths are left to the controller.
	ChartDir string
	// SecretKey, 32 bytes, encrypts write-only spec fields (e.g. kubeconfigs) at rest with AES-256-GCM.
	// Every API replica must share it. Nil stores them in plain text (tests only).
	SecretKey []byte
	// SecretKeys is a key ring, after SecretKey when both are set: the first key seals, every key opens
	// what it sealed, so that keys can be rotated (see Reseal). Every API replica must share it.
	SecretKeys [][]byte
}

// Defaults for Config.
const (
	DefaultMaxBodyBytes     = 1 << 20
	DefaultWaitPollInterval = 500 * time.Millisecond
	DefaultTokenCacheTTL    = 10 * time.Second
	DefaultCascadeTimeout   = 5 * time.Minute
	// MaxWait is the longest ?timeout= a server-side wait accepts.
	MaxWait = 5 * time.Minute
)

// Server is the API server. It implements http.Handler.
type Server struct {
	cfg     Config
	log     *slog.Logger
	router  chi.Router
	hub     *hub
	tokens  *tokenCache
	metrics *metrics
	// watchers fan store changes out to GET /v1/watch streams (watch.go).
	watchers watchHub

	openapiOnce sync.Once
	openapi     []byte
	openapiErr  error
}

// New validates cfg, applies defaults and builds the router.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.WaitPollInterval <= 0 {
		cfg.WaitPollInterval = DefaultWaitPollInterval
	}
	if cfg.TokenCacheTTL <= 0 {
		cfg.TokenCacheTTL = DefaultTokenCacheTTL
	}
	if cfg.CascadeTimeout <= 0 {
		cfg.CascadeTimeout = DefaultCascadeTimeout
	}
	for role, n := range cfg.MaxReplicasPerRole {
		if !slices.Contains(api.Roles, role) {
			return nil, fmt.Errorf("server: MaxReplicasPerRole: unknown role %q (one of %v)", role, api.Roles)
		}
		if n < 0 || n > api.MaxReplicas {
			return nil, fmt.Errorf("server: MaxReplicasPerRole[%s]: must be between 0 and %d, not %d", role, api.MaxReplicas, n)
		}
	}
	if err := checkSealable(api.Kinds()); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if keys := secretKeys(cfg); len(keys) > 0 {
		sl, err := newSealer(keys...)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		cfg.Store = &sealedStore{Store: cfg.Store, s: sl}
	}
	m, err := newMetrics(cfg.Registry, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		hub:     newHub(),
		tokens:  &tokenCache{ttl: cfg.TokenCacheTTL, m: map[string]tokenEntry{}},
		metrics: m,
	}
	s.router = s.routes()
	return s, nil
}

// secretKeys is cfg's key ring, SecretKey first.
func secretKeys(cfg Config) [][]byte {
	var keys [][]byte
	if cfg.SecretKey != nil {
		keys = append(keys, cfg.SecretKey)
	}
	return append(keys, cfg.SecretKeys...)
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(withRequestID, traceRequests, s.observe, s.recoverPanics, s.rejectNUL)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, api.Errorf(api.CodeNotFound, "no route for %s", r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, struct {
			Error *api.Error `json:"error"`
		}{api.Errorf(api.CodeInvalid, "method %s not allowed on %s", r.Method, r.URL.Path)})
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	metrics := promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	if s.cfg.MetricsAuth {
		metrics = s.authenticate(s.require(permRead)(metrics))
	}
	r.Method(http.MethodGet, "/metrics", metrics)
	r.Get("/v1/openapi.json", s.serveOpenAPI)
	r.Route("/v1/tokens", s.tokenRoutes)
	r.With(s.authenticate, s.require(permRead)).Get("/v1/graph", s.graph)
	r.With(s.authenticate, s.require(permWrite)).Post("/v1/plans", s.plan)
	r.With(s.authenticate, s.require(permRead)).Get("/v1/watch", s.watch)
	r.Mount(ui.Prefix, ui.Handler())

	r.Route("/v1/{plural}", func(r chi.Router) {
		r.Use(s.authenticate, s.withKind)
		read, write, status := s.require(permRead), s.require(permWrite), s.require(permStatus)
		r.With(read).Get("/", s.list)
		r.With(write).Post("/", s.create)
		r.With(read).Get("/by-name/{name}", s.getByName)
		r.With(read).Get("/count", s.count)
		r.Route("/{id}", func(r chi.Router) {
			r.With(read).Get("/", s.get)
			r.With(write).Put("/", s.update)
			r.With(write).Patch("/", s.patch)
			r.With(write).Delete("/", s.delete)
			r.With(status).Put("/status", s.updateStatus)
			r.With(status).Post("/finalize", s.finalize)
			r.With(read).Get("/events", s.listEvents)
			r.With(read).Get("/trace", s.lastTrace)
			r.With(status).Post("/events", s.recordEvent)
			r.With(write).Post("/image", s.setImage)
			r.With(s.require(permWrite, permStatus)).Post("/reconcile", s.requestReconcile)
		})
	})
	return r
}

type kindKey struct{}

// withKind resolves {plural} to a registered kind (404 otherwise).
func (s *Server) withKind(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ki, ok := api.LookupPlural(chi.URLParam(r, "plural"))
		if !ok {
			s.fail(w, r, api.Errorf(api.CodeNotFound, "unknown collection %q", chi.URLParam(r, "plural")))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), kindKey{}, ki)))
	})
}

func kindFrom(r *http.Request) *api.KindInfo {
	ki, _ := r.Context().Value(kindKey{}).(*api.KindInfo)
	return ki
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.cfg.Store.Ping(ctx); err != nil {
		s.log.WarnContext(ctx, "not ready", slog.String("check", "store"), slog.Any("error", err))
		s.fail(w, r, api.Errorf(api.CodeUnavailable, "store: %v", err))
		return
	}
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(ctx); err != nil {
			s.log.WarnContext(ctx, "not ready", slog.String("check", "ready"), slog.Any("error", err))
			s.fail(w, r, api.Errorf(api.CodeUnavailable, "%v", err))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// committed tells the outbox relay that a write committed, and wakes the waiters on the object (and the
// watch poller, when a web view is open).
func (s *Server) committed(id string) {
	s.hub.notify(id)
	s.watchers.touch()
	if s.cfg.OnCommit != nil {
		s.cfg.OnCommit()
	}
}
