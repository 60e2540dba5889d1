package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// runOptions are the flags of `kubesim run`, after validation.
type runOptions struct {
	DataDir        string
	Name           string   // "" means: as before, or "kubesim"
	Region         string   // "" means: as before, or "local"
	Zones          []string // nil means: as before, or REGION-a,b,c
	Nodes          int      // 0 means: as before, or 3
	Port           int      // 0 means: as before if free, else any free port
	StartupTimeout time.Duration
}

// readyLine is the one line printed on stdout once the cluster serves.
type readyLine struct {
	Ready      bool   `json:"ready"`
	Name       string `json:"name"`
	Endpoint   string `json:"endpoint"`
	Kubeconfig string `json:"kubeconfig"`
}

// supervisor owns every part of one cluster.
type supervisor struct {
	log      *slog.Logger
	layout   layout
	mu       sync.Mutex
	children []*child // in start order
}

// runCluster starts the cluster, prints the ready line to stdout, and runs
// until ctx ends or a part dies. Every part is stopped before it returns.
func runCluster(ctx context.Context, opts runOptions, stdout io.Writer, log *slog.Logger) (err error) {
	dir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	d := dataDir(dir)
	if err := d.prepare(); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	lock, err := d.lock()
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	defer lock.Close()

	st, err := resolveState(d, opts)
	if err != nil {
		return err
	}
	pki, err := loadOrCreatePKI(d.path("pki"))
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	l := layout{dir: d, pki: pki, state: st}
	if err := l.writeKubeconfigs(st.Name); err != nil {
		return fmt.Errorf("data dir: write kubeconfig: %w", err)
	}

	s := &supervisor{log: log, layout: l}
	defer s.stopAll()

	startCtx, cancel := context.WithTimeout(ctx, opts.StartupTimeout)
	defer cancel()
	begin := time.Now()
	cs, plan, err := s.start(startCtx)
	if err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return err
	}

	lbCtx, stopLB := context.WithCancel(ctx)
	defer stopLB()
	go func() {
		if err := runLoadBalancerController(lbCtx, cs, log.With("part", "loadbalancer")); err != nil && lbCtx.Err() == nil {
			log.Error("load balancer controller stopped", "err", err)
		}
	}()

	dyn, err := dynamic.NewForConfig(restConfig(l.endpoint(), l.pki))
	if err != nil {
		return err
	}
	go runAddons(lbCtx, cs, dyn, l.pki.CA, log.With("part", "addons"))

	if err := waitUntil(startCtx, "nodes", func(ctx context.Context) error { return nodesReady(ctx, cs, plan) }, s.anyExited); err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return err
	}
	log.Info("cluster ready", "name", st.Name, "endpoint", l.endpoint(), "took", time.Since(begin).Round(time.Millisecond))
	s.startedUp()
	line, _ := json.Marshal(readyLine{Ready: true, Name: st.Name, Endpoint: l.endpoint(), Kubeconfig: d.path("kubeconfig")})
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return fmt.Errorf("write ready line: %w", err)
	}
	return s.watch(ctx)
}

// resolveState merges the flags with what the data dir remembers, picks the
// ports, and saves the result.
func resolveState(d dataDir, opts runOptions) (state, error) {
	prev, _, err := d.loadState()
	if err != nil {
		return state{}, fmt.Errorf("data dir: %w", err)
	}
	st := prev
	st.Name = firstNonEmpty(opts.Name, prev.Name, "kubesim")
	st.Region = firstNonEmpty(opts.Region, prev.Region, "local")
	switch {
	case len(opts.Zones) > 0:
		st.Zones = opts.Zones
	case len(prev.Zones) == 0 || opts.Region != "" && opts.Region != prev.Region:
		st.Zones = []string{st.Region + "-a", st.Region + "-b", st.Region + "-c"}
	}
	switch {
	case opts.Nodes > 0:
		st.Nodes = opts.Nodes
	case prev.Nodes <= 0:
		st.Nodes = 3
	}
	taken := map[int]bool{}
	if st.APIServerPort, err = choosePort(partAPIServer, opts.Port, prev.APIServerPort, taken); err != nil {
		return state{}, err
	}
	if st.EtcdClientPort, err = choosePort(partEtcd, 0, prev.EtcdClientPort, taken); err != nil {
		return state{}, err
	}
	if st.EtcdPeerPort, err = choosePort(partEtcd, 0, prev.EtcdPeerPort, taken); err != nil {
		return state{}, err
	}
	if err := d.saveState(st); err != nil {
		return state{}, fmt.Errorf("data dir: %w", err)
	}
	return st, nil
}

// start brings the parts up in order: etcd, the API server, then the
// controller manager, scheduler and kwok together; then it registers nodes.
func (s *supervisor) start(ctx context.Context) (kubernetes.Interface, []nodeSpec, error) {
	l := s.layout
	etcdLog := l.dir.path("logs", partEtcd+".log")
	etcd, err := s.startInProcess(partEtcd, etcdLog, runEtcd(l.etcdConfig(etcdLog)))
	if err != nil {
		return nil, nil, err
	}
	etcdHealth, err := etcdHealthCheck(l)
	if err != nil {
		return nil, nil, err
	}
	if err := etcd.waitReady(ctx, etcdHealth); err != nil {
		return nil, nil, err
	}
	s.log.Info("part ready", "part", partEtcd)

	api, err := s.spawn(partAPIServer, l.apiServerArgs(), gcEnv(apiServerSteadyGCPercent))
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(restConfig(l.endpoint(), l.pki))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: client: %w", partAPIServer, err)
	}
	if err := api.waitReady(ctx, func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return nil, nil, err
	}
	s.log.Info("part ready", "part", partAPIServer)

	if _, err := s.spawn(partControllerManager, l.controllerManagerArgs(), gcEnv(steadyGCPercent)); err != nil {
		return nil, nil, err
	}
	if _, err := s.spawn(partScheduler, l.schedulerArgs(), gcEnv(steadyGCPercent)); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(l.dir.path("kwok"), 0o700); err != nil {
		return nil, nil, fmt.Errorf("data dir: %w", err)
	}
	if _, err := s.startInProcess(partKwok, l.dir.path("logs", partKwok+".log"), runKwok(l.dir.path("kwok"), l.kwokArgs())); err != nil {
		return nil, nil, err
	}

	plan := planNodes(l.state.Name, l.state.Region, l.state.Zones, l.state.Nodes)
	if err := waitUntil(ctx, "nodes", func(ctx context.Context) error { return ensureNodes(ctx, cs, plan) }, s.anyExited); err != nil {
		return nil, nil, err
	}
	// Pods in "default" need its service account, which the controller
	// manager creates; waiting here spares users a first failed create.
	if err := waitUntil(ctx, partControllerManager, func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return errors.New("default service account not created yet")
		}
		return err
	}, s.anyExited); err != nil {
		return nil, nil, err
	}
	return cs, plan, nil
}

// spawn starts a part as a child process and records it for stopAll.
func (s *supervisor) spawn(part string, args, env []string) (*child, error) {
	c, err := startChild(part, s.layout.dir.path("logs", part+".log"), args, env)
	if err != nil {
		return nil, err
	}
	s.log.Info("part started", "part", part, "pid", c.pid())
	s.record(c)
	return c, nil
}

// startInProcess starts a part inside the supervisor and records it for
// stopAll.
func (s *supervisor) startInProcess(part, logPath string, run func(context.Context, io.Writer) error) (*child, error) {
	c, err := startInProcess(part, logPath, run)
	if err != nil {
		return nil, err
	}
	s.log.Info("part started", "part", part, "in_process", true)
	s.record(c)
	return c, nil
}

func (s *supervisor) record(c *child) {
	s.mu.Lock()
	s.children = append(s.children, c)
	s.mu.Unlock()
}

// startedUp switches every part to its steady-state GC setting: the child
// processes through their fd 3, this process (etcd and kwok) directly.
func (s *supervisor) startedUp() {
	if os.Getenv("GOGC") != "" {
		return
	}
	s.mu.Lock()
	for _, c := range s.children {
		c.startedUp()
	}
	s.mu.Unlock()
	steadyGC(steadyGCPercent)
}

// anyExited returns an error naming the first part that has died.
func (s *supervisor) anyExited() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.children {
		if c.exited() {
			return fmt.Errorf("%s: exited during start-up: %s", c.part, c.cause())
		}
	}
	return nil
}

// watch waits for ctx to end (a clean stop) or for any part to die.
func (s *supervisor) watch(ctx context.Context) error {
	s.mu.Lock()
	children := append([]*child(nil), s.children...)
	s.mu.Unlock()
	died := make(chan *child, len(children))
	for _, c := range children {
		go func() {
			<-c.done
			died <- c
		}()
	}
	select {
	case <-ctx.Done():
		s.log.Info("stopping")
		return nil
	case c := <-died:
		return fmt.Errorf("%s: exited unexpectedly: %s", c.part, c.cause())
	}
}

// stopAll stops the parts in reverse start order, the leaf parts together,
// then the API server, then etcd, so that nothing logs storage errors.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	children := append([]*child(nil), s.children...)
	s.mu.Unlock()
	var leaves, core []*child
	for _, c := range children {
		if c.part == partEtcd || c.part == partAPIServer {
			core = append(core, c)
		} else {
			leaves = append(leaves, c)
		}
	}
	var wg sync.WaitGroup
	for _, c := range leaves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.stop(10 * time.Second)
		}()
	}
	wg.Wait()
	for i := len(core) - 1; i >= 0; i-- {
		core[i].stop(15 * time.Second)
	}
	if len(children) > 0 {
		s.log.Info("stopped")
	}
}

// waitUntil polls check until it succeeds; it gives up when ctx ends or
// dead reports a dead part.
func waitUntil(ctx context.Context, what string, check func(context.Context) error, dead func() error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last := check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		if err := dead(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s: not ready in time: %v", what, last)
			}
			return errInterrupted
		case <-tick.C:
		}
	}
}

// etcdHealthCheck calls etcd's /health with the API server's client
// certificate.
func etcdHealthCheck(l layout) (func(context.Context) error, error) {
	cert, err := tls.LoadX509KeyPair(l.pki.cert("apiserver-etcd-client"), l.pki.key("apiserver-etcd-client"))
	if err != nil {
		return nil, fmt.Errorf("%s: client certificate: %w", partEtcd, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(l.pki.CA.Cert)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool},
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d/health", l.state.EtcdClientPort)
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var h struct {
			Health string `json:"health"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			return err
		}
		if h.Health != "true" {
			return fmt.Errorf("health is %q", h.Health)
		}
		return nil
	}, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func oneLine(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '\n' || r == '\r' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}
