package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
)

// LocalConfig configures LocalClusters.
type LocalConfig struct {
	// Dir holds one data directory per local runtime, named by runtime id (required). The kubeconfig is
	// written to <Dir>/<id>/kubeconfig, where kube.Connector looks for it.
	Dir string
	// Binary is the kubesim binary (default: kubesim.FindBinary()).
	Binary string
	// Logger receives lifecycle logs (default slog.Default()).
	Logger *slog.Logger
	// OnExit, when set, is called (in its own goroutine) when a cluster's process exits without Remove
	// or StopAll asking it to, with the exit error. The cluster is then no longer running: the next
	// Ensure starts it again on the same data.
	OnExit func(id string, err error)
}

// LocalClusters runs the kubesim clusters of local runtimes as child processes of the control plane.
type LocalClusters struct {
	cfg LocalConfig
	mu  sync.Mutex
	run map[string]*kubesim.Cluster
	// per-runtime start locks, so that two reconciles never start one cluster twice
	starting map[string]*sync.Mutex
}

// NewLocalClusters returns a manager; clusters start on demand in Ensure.
func NewLocalClusters(cfg LocalConfig) *LocalClusters {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &LocalClusters{cfg: cfg, run: map[string]*kubesim.Cluster{}, starting: map[string]*sync.Mutex{}}
}

func (l *LocalClusters) dir(id string) string { return filepath.Join(l.cfg.Dir, id) }

// Ensure starts the runtime's cluster unless it is already running. Restarting on an existing data dir
// brings back the same cluster and its objects.
func (l *LocalClusters) Ensure(ctx context.Context, rt *client.KubernetesRuntime) error {
	l.mu.Lock()
	m, ok := l.starting[rt.ID]
	if !ok {
		m = &sync.Mutex{}
		l.starting[rt.ID] = m
	}
	l.mu.Unlock()
	m.Lock()
	defer m.Unlock()

	l.mu.Lock()
	c := l.run[rt.ID]
	l.mu.Unlock()
	if c != nil && c.Running() {
		return nil
	}
	bin := l.cfg.Binary
	if bin == "" {
		var err error
		if bin, err = kubesim.FindBinary(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(l.dir(rt.ID), 0o700); err != nil {
		return fmt.Errorf("local runtime data dir: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(l.dir(rt.ID), "kubesim.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("local runtime log: %w", err)
	}
	nodes := rt.Spec.Nodes
	if nodes == 0 {
		nodes = 3
	}
	region := rt.Spec.Region
	if region == "" {
		region = "local"
	}
	l.cfg.Logger.Info("starting local cluster", "runtime", rt.Name, "id", rt.ID)
	c, err = kubesim.Start(ctx, kubesim.Config{
		Binary: bin, DataDir: l.dir(rt.ID), Name: rt.Name, Region: region, Zones: rt.Spec.Zones,
		Nodes: nodes, Stderr: io.Writer(logf),
	})
	if err != nil {
		_ = logf.Close()
		return err
	}
	l.mu.Lock()
	l.run[rt.ID] = c
	l.mu.Unlock()
	l.cfg.Logger.Info("local cluster ready", "runtime", rt.Name, "endpoint", c.Endpoint)
	go l.watch(rt.ID, c)
	return nil
}

// watch waits for c to exit and reports an exit nobody asked for.
func (l *LocalClusters) watch(id string, c *kubesim.Cluster) {
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
func (l *LocalClusters) Remove(ctx context.Context, id string) error {
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
func (l *LocalClusters) StopAll(ctx context.Context) {
	l.mu.Lock()
	run := l.run
	l.run = map[string]*kubesim.Cluster{}
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
