package kubesim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// SupervisorConfig configures a Supervisor.
type SupervisorConfig struct {
	// Dir holds one data directory per cluster, named by its id (required). The kubeconfig is written to
	// <Dir>/<id>/kubeconfig, where kube.Connector looks for a local runtime's.
	Dir string
	// Binary is the kubesim binary (default: FindBinary()).
	Binary string
	// Logger receives lifecycle logs (default slog.Default()).
	Logger *slog.Logger
	// OnExit, when set, is called (in its own goroutine) when a cluster's process exits without Remove
	// or StopAll asking it to, with the exit error. The cluster is then no longer running: the next
	// Ensure starts it again on the same data.
	OnExit func(id string, err error)
}

// Supervisor runs kubesim clusters (those of local runtimes) as child processes of the control plane:
// it starts each on demand, notices at once when one exits on its own, and stops them.
type Supervisor struct {
	cfg SupervisorConfig
	mu  sync.Mutex
	run map[string]*Cluster
	// per-runtime start locks, so that two reconciles never start one cluster twice
	starting map[string]*sync.Mutex
}

// NewSupervisor returns a supervisor; clusters start on demand in Ensure.
func NewSupervisor(cfg SupervisorConfig) *Supervisor {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Supervisor{cfg: cfg, run: map[string]*Cluster{}, starting: map[string]*sync.Mutex{}}
}

func (l *Supervisor) dir(id string) string { return filepath.Join(l.cfg.Dir, id) }

// Spec is what a supervised cluster looks like. Zero values take Start's defaults, except Nodes (3)
// and Region ("local").
type Spec struct {
	// Name is the cluster name.
	Name string
	// Region labels the nodes.
	Region string
	// Zones are spread over the nodes.
	Zones []string
	// Nodes is the node count.
	Nodes int
}

// Ensure starts the cluster with that id unless it is already running. Restarting on an existing data
// dir brings back the same cluster and its objects.
func (l *Supervisor) Ensure(ctx context.Context, id string, spec Spec) error {
	l.mu.Lock()
	m, ok := l.starting[id]
	if !ok {
		m = &sync.Mutex{}
		l.starting[id] = m
	}
	l.mu.Unlock()
	m.Lock()
	defer m.Unlock()

	l.mu.Lock()
	c := l.run[id]
	l.mu.Unlock()
	if c != nil && c.Running() {
		return nil
	}
	bin := l.cfg.Binary
	if bin == "" {
		var err error
		if bin, err = FindBinary(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(l.dir(id), 0o700); err != nil {
		return fmt.Errorf("local runtime data dir: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(l.dir(id), "kubesim.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("local runtime log: %w", err)
	}
	nodes := spec.Nodes
	if nodes == 0 {
		nodes = 3
	}
	region := spec.Region
	if region == "" {
		region = "local"
	}
	l.cfg.Logger.Info("starting local cluster", "name", spec.Name, "id", id)
	c, err = Start(ctx, Config{
		Binary: bin, DataDir: l.dir(id), Name: spec.Name, Region: region, Zones: spec.Zones,
		Nodes: nodes, Stderr: io.Writer(logf),
	})
	if err != nil {
		_ = logf.Close()
		return err
	}
	l.mu.Lock()
	l.run[id] = c
	l.mu.Unlock()
	l.cfg.Logger.Info("local cluster ready", "name", spec.Name, "endpoint", c.Endpoint)
	go l.watch(id, c)
	return nil
}

// watch waits for c to exit and reports an exit nobody asked for.
func (l *Supervisor) watch(id string, c *Cluster) {
	err := c.Wait()
	l.mu.Lock()
	unexpected := l.run[id] == c
	if unexpected {
		delete(l.run, id)
	}
	l.mu.Unlock()
	if !unexpected {
		return
	}
	if err == nil {
		err = errors.New("kubesim exited")
	}
	l.cfg.Logger.Warn("local cluster exited", "id", id, "err", err)
	if l.cfg.OnExit != nil {
		l.cfg.OnExit(id, err)
	}
}

// Remove stops the runtime's cluster and deletes its data.
func (l *Supervisor) Remove(ctx context.Context, id string) error {
	l.mu.Lock()
	c := l.run[id]
	delete(l.run, id)
	l.mu.Unlock()
	if c != nil {
		if err := c.Stop(ctx); err != nil {
			return fmt.Errorf("stop local cluster: %w", err)
		}
	}
	if err := os.RemoveAll(l.dir(id)); err != nil {
		return fmt.Errorf("remove local cluster data: %w", err)
	}
	return nil
}

// StopAll stops every running cluster and keeps their data, for a control-plane shutdown.
func (l *Supervisor) StopAll(ctx context.Context) {
	l.mu.Lock()
	run := l.run
	l.run = map[string]*Cluster{}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for id, c := range run {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Stop(ctx); err != nil {
				l.cfg.Logger.Warn("stop local cluster", "id", id, "err", err)
			}
		}()
	}
	wg.Wait()
}
