// Package kubesimtest starts kubesim clusters for tests: one per call, in the
// test's temporary directory, stopped and removed when the test ends.
package kubesimtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
)

// Option changes how Start configures the cluster.
type Option func(*kubesim.Config)

// WithName sets the cluster name.
func WithName(name string) Option { return func(c *kubesim.Config) { c.Name = name } }

// WithRegion sets the region label of the nodes.
func WithRegion(region string) Option { return func(c *kubesim.Config) { c.Region = region } }

// WithZones sets the zones the nodes are spread over.
func WithZones(zones ...string) Option { return func(c *kubesim.Config) { c.Zones = zones } }

// WithNodes sets the number of nodes.
func WithNodes(n int) Option { return func(c *kubesim.Config) { c.Nodes = n } }

// StartTimeout bounds start-up, including building the binary the first
// time (a cold build takes minutes).
const StartTimeout = 10 * time.Minute

var binary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the kubesim binary, building it into <repo root>/bin once
// per test process if none is found.
func Binary(ctx context.Context) (string, error) {
	binary.once.Do(func() {
		binary.path, binary.err = kubesim.FindBinary()
		if !errors.Is(binary.err, kubesim.ErrBinaryNotFound) {
			return
		}
		root, err := kubesim.RepoRoot()
		if err != nil {
			binary.err = err
			return
		}
		binary.path, binary.err = kubesim.Build(ctx, root)
	})
	return binary.path, binary.err
}

// Start starts a cluster in t.TempDir() and registers its stop and removal
// with t.Cleanup. Any failure is fatal to the test, never a skip. When the
// test fails, the cleanup logs the tail of kubesim's stderr.
func Start(t testing.TB, opts ...Option) *kubesim.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	bin, err := Binary(ctx)
	if err != nil {
		t.Fatalf("kubesimtest: no kubesim binary: %v", err)
	}
	log := &logBuffer{}
	cfg := kubesim.Config{Binary: bin, DataDir: t.TempDir(), Stderr: log}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := kubesim.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("kubesimtest: start cluster: %v", err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(stopCtx); err != nil {
			t.Errorf("kubesimtest: stop cluster %s: %v", c.Name, err)
		}
		if t.Failed() {
			t.Logf("kubesim %s stderr (last lines):\n%s", c.Name, log.tail(60))
		}
	})
	return c
}

// logBuffer keeps kubesim's stderr for the failure log.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		s := b.buf.String()
		b.buf.Reset()
		b.buf.WriteString(s[len(s)/2:])
	}
	return b.buf.Write(p)
}

func (b *logBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(b.buf.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
