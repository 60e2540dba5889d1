package awssim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Config says how the stand-in behaves. Zero values take the defaults noted
// on each field.
type Config struct {
	// Addr is the listen address. Default "127.0.0.1:0" (any free port).
	Addr string
	// Region is the region reported where a request names none (Route53's
	// global calls). Default "us-east-1".
	Region string
	// ClusterDelay is how long an EKS cluster stays CREATING (at least; with
	// kubesim it is also not ACTIVE before its control plane serves).
	// Default 2s.
	ClusterDelay time.Duration
	// NodegroupDelay is how long an EKS node group stays CREATING or UPDATING.
	// Default 1s.
	NodegroupDelay time.Duration
	// DBDelay is how long an RDS instance stays "creating". Default 1s.
	DBDelay time.Duration
	// DeleteDelay is how long an EKS cluster, node group or RDS instance stays
	// DELETING/"deleting" before it is gone. Default 1s.
	DeleteDelay time.Duration
	// EKSTokenLifetime is how long after its X-Amz-Date an EKS token (a
	// presigned STS GetCallerIdentity URL) is accepted by a cluster endpoint,
	// whatever its X-Amz-Expires says, as aws-iam-authenticator does.
	// Default 15m.
	EKSTokenLifetime time.Duration
	// Kubesim makes every EKS cluster a kubesim cluster (a real local
	// Kubernetes control plane) served behind an authenticating endpoint.
	// When false, clusters still get an endpoint and CA, but the endpoint
	// answers 503 to authenticated requests. Default false.
	Kubesim bool
	// KubesimBinary is the kubesim executable. Default: kubesim.FindBinary()
	// ($QLEET_KUBESIM_BIN, <repo>/bin/kubesim, or PATH).
	KubesimBinary string
	// DataDir holds the kubesim clusters' state. Default: a temporary
	// directory removed by Stop.
	DataDir string
	// KubesimStderr receives every kubesim's log. Default: discarded.
	KubesimStderr io.Writer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.ClusterDelay == 0 {
		c.ClusterDelay = 2 * time.Second
	}
	if c.NodegroupDelay == 0 {
		c.NodegroupDelay = time.Second
	}
	if c.DBDelay == 0 {
		c.DBDelay = time.Second
	}
	if c.DeleteDelay == 0 {
		c.DeleteDelay = time.Second
	}
	if c.EKSTokenLifetime == 0 {
		c.EKSTokenLifetime = 15 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Sim is the AWS stand-in: one HTTP endpoint that serves STS, IAM, EC2, EKS,
// RDS, S3 and Route53, routed by the service named in each request's SigV4
// credential scope.
type Sim struct {
	cfg Config

	mu       sync.Mutex
	accounts map[string]*Account // by account ID
	keys     map[string]*credential
	calls    []Call
	faults   []*fault
	state    *state
	seq      int
	// eksUpdates are the node group updates by ID, for DescribeUpdate.
	eksUpdates map[string]*eksUpdate
	// tokens are the EKS tokens verified, by cluster and token.
	tokens map[string]verifiedToken

	ln      net.Listener
	srv     *http.Server
	url     string
	tlsCert tls.Certificate
	caPEM   []byte
	dataDir string
	tmpDir  bool
	bg      sync.WaitGroup
	stop    chan struct{}
}

// New returns a stand-in configured by cfg; Start makes it serve.
func New(cfg Config) *Sim {
	cfg.defaults()
	return &Sim{
		cfg:        cfg,
		accounts:   map[string]*Account{},
		keys:       map[string]*credential{},
		state:      newState(),
		eksUpdates: map[string]*eksUpdate{},
		tokens:     map[string]verifiedToken{},
		stop:       make(chan struct{}),
	}
}

// Start listens on Config.Addr and serves until Stop. ctx bounds start-up
// only.
func (s *Sim) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cert, caPEM, err := newServingCert()
	if err != nil {
		return fmt.Errorf("awssim: %w", err)
	}
	s.tlsCert, s.caPEM = cert, caPEM
	s.dataDir = s.cfg.DataDir
	if s.dataDir == "" && s.cfg.Kubesim {
		if s.dataDir, err = os.MkdirTemp("", "awssim-"); err != nil {
			return fmt.Errorf("awssim: %w", err)
		}
		s.tmpDir = true
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("awssim: listen: %w", err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		_ = s.srv.Serve(ln)
	}()
	return nil
}

// URL is the endpoint to give the SDK clients as BaseEndpoint, e.g.
// http://127.0.0.1:41234. Valid after Start.
func (s *Sim) URL() string { return s.url }

// Stop stops serving, stops every EKS cluster's endpoint and kubesim, and
// removes the temporary data directory.
func (s *Sim) Stop(ctx context.Context) error {
	select {
	case <-s.stop:
		return nil
	default:
		close(s.stop)
	}
	var errs []error
	if s.srv != nil {
		errs = append(errs, s.srv.Shutdown(ctx))
	}
	s.mu.Lock()
	clusters := make([]*eksCluster, 0, len(s.state.clusters))
	for _, c := range s.state.clusters {
		clusters = append(clusters, c)
	}
	s.mu.Unlock()
	for _, c := range clusters {
		errs = append(errs, c.shutdown(ctx))
	}
	s.bg.Wait()
	if s.tmpDir {
		errs = append(errs, os.RemoveAll(s.dataDir))
	}
	return errors.Join(errs...)
}

// AdminPrefix is the path prefix of the stand-in's own routes, which need no
// signature: GET /_awssim/calls (the call log as JSON; ?service= and
// ?action= filter it), GET /_awssim/calls/count (calls per service), GET
// /_awssim/resources (what exists now), POST /_awssim/accounts (add an
// account; answers its keys) and POST /_awssim/faults (inject a Fault given as
// JSON; DELETE clears them).
const AdminPrefix = "/_awssim/"

// ServeHTTP routes a request: admin routes by path, everything else by the
// service in its SigV4 credential scope.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, AdminPrefix) {
		s.serveAdmin(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.serveAWS(w, r, body)
}

func (s *Sim) serveAdmin(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	}
	switch strings.TrimPrefix(r.URL.Path, AdminPrefix) {
	case "calls":
		calls := Filter(s.Calls(), r.URL.Query().Get("service"), r.URL.Query().Get("action"))
		if calls == nil {
			calls = []Call{}
		}
		writeJSON(http.StatusOK, calls)
	case "calls/count":
		writeJSON(http.StatusOK, CountByService(s.Calls()))
	case "resources":
		writeJSON(http.StatusOK, s.Resources())
	case "accounts":
		if r.Method != http.MethodPost {
			writeJSON(http.StatusMethodNotAllowed, map[string]string{"error": "POST only"})
			return
		}
		var in struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil && !errors.Is(err, io.EOF) {
			writeJSON(http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
			return
		}
		a, err := s.AddAccount(in.ID)
		if err != nil {
			writeJSON(http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(http.StatusOK, a)
	case "faults":
		switch r.Method {
		case http.MethodDelete:
			s.ClearFaults()
			w.WriteHeader(http.StatusNoContent)
		case http.MethodPost:
			var f Fault
			if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
				writeJSON(http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
				return
			}
			if err := s.Inject(f); err != nil {
				writeJSON(http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			writeJSON(http.StatusMethodNotAllowed, map[string]string{"error": "POST or DELETE only"})
		}
	default:
		writeJSON(http.StatusNotFound, map[string]string{"error": "no such route; try calls, resources, accounts, faults"})
	}
}

// nextID returns a counter for generated identifiers.
func (s *Sim) nextID() int {
	s.seq++
	return s.seq
}

func (s *Sim) now() time.Time { return s.cfg.Now().UTC() }
