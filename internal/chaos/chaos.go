// Package chaos runs the scale-out topology on one machine (PostgreSQL, a three-node NATS cluster, two
// `qleet api` and three `qleet controller` processes behind a TCP load balancer, and a kubesim cluster
// registered as a kubeconfig runtime with a `qleet agent` watching it), drives writes through the Go client while killing parts with
// SIGKILL and restarting them, and then checks that nothing acknowledged was lost, that no object was
// reconciled by two workers at once, that the cluster holds nothing the API does not know, and how
// long the system took to converge. `make chaos` runs it in full; TestChaos runs a short version.
package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
)

// Parts that are killed, in the order of Report.Kills. "nats" is a NATS server at random; "nats-leader"
// is the one that leads a reconcile consumer or the lock bucket (taking turns), found through the
// JetStream API, so that every run makes those parts elect a new leader under load.
var Parts = []string{"api", "controller", "nats", "nats-leader", "postgres"}

// Config configures a run. Zero values take the documented defaults.
type Config struct {
	// Writes is the number of acknowledged writes to drive (default 1000).
	Writes int
	// Writers is the number of concurrent writers (default 4).
	Writers int
	// Rate paces the writers, in writes per second all together (default 6: what one loaded two-core
	// machine running kubesim absorbs without a backlog, mostly of namespaces terminating after
	// deletes), so that the kills fall among the writes and convergence measures recovery, not backlog.
	Rate float64
	// KillsPerPart is how many times each part (an API replica, a controller replica, a NATS server, the
	// NATS server leading a consumer or the lock bucket, PostgreSQL) is killed during the writes
	// (default 2).
	KillsPerPart int
	// Downtime bounds how long a killed part stays down before it is started again (default 2s; each
	// outage lasts a random time up to it, at least 200ms).
	Downtime time.Duration
	// ConvergeWithin is the promise checked: convergence within this long of the last restart or the
	// last write, whichever is later (default 15s). Wait is how long the run waits for convergence at
	// all before it reports what is still wrong (default 2m).
	ConvergeWithin, Wait time.Duration
	// QleetBinary and NATSBinary are the qleet and nats-server executables. Required.
	QleetBinary, NATSBinary string
	// KubesimBinary is the kubesim executable (default: kubesim.FindBinary).
	KubesimBinary string
	// WorkDir holds every part's data and log. Required.
	WorkDir string
	// Seed makes the schedule of operations and kills repeatable (default: random).
	Seed uint64
	// Logf receives progress lines (default: none).
	Logf func(format string, args ...any)
	// LogLevel is the API's and controllers' --log-level (default info); debug shows each notification's
	// path when a run has to be explained.
	LogLevel string
}

func (c *Config) defaults() error {
	if c.QleetBinary == "" || c.NATSBinary == "" || c.WorkDir == "" {
		return fmt.Errorf("chaos: QleetBinary, NATSBinary and WorkDir are required")
	}
	if c.Writes <= 0 {
		c.Writes = 1000
	}
	if c.Writers <= 0 {
		c.Writers = 4
	}
	if c.Rate <= 0 {
		c.Rate = 6
	}
	if c.KillsPerPart <= 0 {
		c.KillsPerPart = 2
	}
	if c.Downtime <= 0 {
		c.Downtime = 2 * time.Second
	}
	if c.ConvergeWithin <= 0 {
		c.ConvergeWithin = 15 * time.Second
	}
	if c.Wait <= 0 {
		c.Wait = 2 * time.Minute
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	return nil
}

// Report holds a run's figures; it is what docs/reliability.json holds.
type Report struct {
	// Seed of the run.
	Seed uint64 `json:"seed"`
	// Writes is the number of acknowledged writes (creates, updates, deletes).
	Writes int `json:"writes"`
	// WritesByOp counts them by operation.
	WritesByOp map[string]int `json:"writes_by_op"`
	// Retries is how many write attempts failed (and were retried) along the way.
	Retries int `json:"retries"`
	// Kills counts the SIGKILLs per part.
	Kills map[string]int `json:"kills"`
	// Lost is the number of acknowledged writes not reflected in the API and the cluster at the end.
	Lost int `json:"lost"`
	// LockSpans is the number of reconcile lock holds logged; Overlaps those that overlapped another
	// hold of the same object.
	LockSpans int `json:"lock_spans"`
	Overlaps  int `json:"overlaps"`
	// Orphans is the number of cluster objects labelled as QleetOS's whose instance the API does not know.
	Orphans int `json:"orphans"`
	// ConvergenceSeconds is how long after the later of the last restart and the last write the API
	// and the cluster agreed with every acknowledged write.
	ConvergenceSeconds float64 `json:"convergence_seconds"`
	// ConvergeWithinSeconds is the promise it is checked against.
	ConvergeWithinSeconds float64 `json:"converge_within_seconds"`
	// Instances and Definitions alive at the end.
	Instances   int `json:"instances"`
	Definitions int `json:"definitions"`
	// DurationSeconds is the whole write phase.
	DurationSeconds float64 `json:"duration_seconds"`
	// Problems lists every violation found; empty on a green run.
	Problems []string `json:"problems"`
}

// OK reports whether the run met every promise.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// topology is the running parts.
type topology struct {
	cfg         Config
	pg          *postgres
	nats        []*proc
	apis        []*proc
	controllers []*proc
	lb          *balancer
	cluster     *kubesim.Cluster
	cl          *client.Client
	natsURLs    string
	spanLogs    []string
	ctrlToken   string
	agent       *proc
}

func (t *topology) parts(part string) []*proc {
	switch part {
	case "api":
		return t.apis
	case "controller":
		return t.controllers
	case "nats", "nats-leader":
		return t.nats
	default:
		return []*proc{t.pg.proc}
	}
}

func (t *topology) close() {
	if t.agent != nil {
		t.agent.stop()
	}
	for _, group := range [][]*proc{t.controllers, t.apis, t.nats} {
		for _, p := range group {
			p.stop()
		}
	}
	if t.pg != nil {
		t.pg.stop()
		_ = os.RemoveAll(t.pg.dir)
	}
	if t.lb != nil {
		t.lb.Close()
	}
	if t.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = t.cluster.Stop(ctx)
	}
}

// Run starts the topology, drives the writes and kills, checks the outcome and stops everything.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	t := &topology{cfg: cfg}
	defer t.close()
	start := time.Now()
	if err := t.up(ctx); err != nil {
		return nil, err
	}
	cfg.Logf("topology up in %s", time.Since(start).Round(time.Millisecond))
	return t.run(ctx)
}

func (t *topology) up(ctx context.Context) error {
	cfg := t.cfg
	dir := func(name string) (string, error) {
		d := filepath.Join(cfg.WorkDir, name)
		return d, os.MkdirAll(d, 0o755)
	}

	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return err
	}
	var err error
	if t.pg, err = newPostgres(ctx, filepath.Join(cfg.WorkDir, "postgres.log")); err != nil {
		return err
	}

	// Three NATS servers with routes, JetStream on each.
	var clientPorts, routePorts []int
	for range 3 {
		cp, err := freePort()
		if err != nil {
			return err
		}
		rp, err := freePort()
		if err != nil {
			return err
		}
		clientPorts, routePorts = append(clientPorts, cp), append(routePorts, rp)
	}
	var routes, urls []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", routePorts[i]))
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[i]))
	}
	t.natsURLs = strings.Join(urls, ",")
	for i := range 3 {
		d, err := dir(fmt.Sprintf("nats%d", i))
		if err != nil {
			return err
		}
		p := &proc{part: "nats", name: fmt.Sprintf("nats%d", i), server: fmt.Sprintf("n%d", i), dir: d, log: filepath.Join(d, "nats.log"),
			argv: []string{cfg.NATSBinary, "-n", fmt.Sprintf("n%d", i), "-a", "127.0.0.1", "-p", fmt.Sprint(clientPorts[i]),
				"-js", "-sd", d, "--cluster_name", "chaos", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i]),
				"--routes", strings.Join(routes, ",")}}
		if err := p.start(); err != nil {
			return err
		}
		t.nats = append(t.nats, p)
	}
	for i := range 3 {
		if err := poll(ctx, "nats ready", dialable(fmt.Sprintf("127.0.0.1:%d", clientPorts[i]))); err != nil {
			return err
		}
	}
	// Create the stream and the lock bucket with three replicas before any qleet process starts; they
	// keep the count (broker.Config.Replicas 0).
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = poll(wctx, "R3 stream", func(ctx context.Context) error {
		b, err := broker.Start(ctx, broker.Config{URL: t.natsURLs, Replicas: 3, Name: "chaos-setup",
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return err
		}
		b.Close()
		return nil
	})
	cancel()
	if err != nil {
		return err
	}

	// Two API replicas on one data dir (tokens and the secret key are shared), behind the balancer.
	apiDir, err := dir("api")
	if err != nil {
		return err
	}
	var addrs []string
	for i := range 2 {
		port, err := freePort()
		if err != nil {
			return err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		addrs = append(addrs, addr)
		p := &proc{part: "api", name: fmt.Sprintf("api%d", i), dir: apiDir, log: filepath.Join(apiDir, fmt.Sprintf("api%d.log", i)),
			argv: []string{cfg.QleetBinary, "api", "--data-dir", apiDir, "--listen", addr, "--database-url", t.pg.url,
				"--nats-url", t.natsURLs, "--trace-buffer", "0", "--log-level", cfg.LogLevel}}
		if err := p.start(); err != nil {
			return err
		}
		if err := poll(ctx, p.name+" ready", httpOK("http://"+addr+"/healthz")); err != nil {
			return fmt.Errorf("%w\n%s", err, logTail(p.log))
		}
		t.apis = append(t.apis, p)
	}
	if t.lb, err = newBalancer(addrs); err != nil {
		return err
	}
	admin, err := os.ReadFile(filepath.Join(apiDir, "admin.token"))
	if err != nil {
		return err
	}
	ctrlToken, err := os.ReadFile(filepath.Join(apiDir, "controller.token"))
	if err != nil {
		return err
	}
	t.ctrlToken = strings.TrimSpace(string(ctrlToken))
	if t.cl, err = client.New(t.lb.URL(), client.WithToken(strings.TrimSpace(string(admin)))); err != nil {
		return err
	}

	for i := range 3 {
		d, err := dir(fmt.Sprintf("controller%d", i))
		if err != nil {
			return err
		}
		spans := filepath.Join(d, "lock-spans.jsonl")
		t.spanLogs = append(t.spanLogs, spans)
		p := &proc{part: "controller", name: fmt.Sprintf("controller%d", i), dir: d, log: filepath.Join(d, "controller.log"),
			env: []string{"QLEET_LOCK_SPAN_LOG=" + spans},
			argv: []string{cfg.QleetBinary, "controller", "--data-dir", d, "--api-endpoint", t.lb.URL(),
				"--token", strings.TrimSpace(string(ctrlToken)), "--nats-url", t.natsURLs,
				"--workers", "4", "--resync", "5s", "--trace-buffer", "0", "--log-level", cfg.LogLevel}}
		if err := p.start(); err != nil {
			return err
		}
		t.controllers = append(t.controllers, p)
	}

	ksDir, err := dir("kubesim")
	if err != nil {
		return err
	}
	ksLog, err := os.Create(filepath.Join(ksDir, "kubesim.log"))
	if err != nil {
		return err
	}
	bin := cfg.KubesimBinary
	if bin == "" {
		if bin, err = kubesim.FindBinary(); err != nil {
			return err
		}
	}
	if t.cluster, err = kubesim.Start(ctx, kubesim.Config{Binary: bin, DataDir: ksDir, Name: "chaos", Nodes: 3, Stderr: ksLog}); err != nil {
		return err
	}
	return nil
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	return tail(string(b), 3000)
}
