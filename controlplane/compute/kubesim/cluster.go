package kubesim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultStartTimeout bounds start-up when the context given to Start has no
// deadline.
const DefaultStartTimeout = 2 * time.Minute

// Config says how to start one cluster. Zero values take the defaults noted
// on each field.
type Config struct {
	// Binary is the kubesim executable. Default: FindBinary().
	Binary string
	// DataDir holds the cluster's state (certificates, etcd data, logs, the
	// kubeconfig). Required. Starting again on the same DataDir brings back
	// the same cluster with its objects.
	DataDir string
	// Name is the cluster name. Default: the name used before on DataDir,
	// or "kubesim".
	Name string
	// Region is the topology.kubernetes.io/region label of every node.
	// Default: as before, or "local".
	Region string
	// Zones are given to the nodes round-robin as
	// topology.kubernetes.io/zone. Default: as before, or Region+"-a", "-b",
	// "-c".
	Zones []string
	// Nodes is the number of simulated nodes. Default: as before, or 3.
	Nodes int
	// Port is the API server's port on 127.0.0.1. Default 0: the port used
	// before on DataDir if it is free, or else any free port.
	Port int
	// Stderr receives kubesim's log. Default: discarded (the tail is still
	// kept for error messages).
	Stderr io.Writer
}

// Cluster is a running kubesim.
type Cluster struct {
	// Name is the cluster name.
	Name string
	// Endpoint is the API server URL, e.g. https://127.0.0.1:41234.
	Endpoint string
	// Kubeconfig is the path of an admin kubeconfig (system:masters).
	Kubeconfig string
	// PID is the kubesim process ID.
	PID int

	cmd  *exec.Cmd
	tail *tailWriter
	done chan struct{}
	err  error // set before done is closed
}

// readyLine is what kubesim prints on stdout once the cluster serves.
type readyLine struct {
	Ready      bool   `json:"ready"`
	Name       string `json:"name"`
	Endpoint   string `json:"endpoint"`
	Kubeconfig string `json:"kubeconfig"`
}

// Start runs kubesim and returns once the cluster serves and all its nodes
// are Ready. ctx bounds start-up only (DefaultStartTimeout if it has no
// deadline); the cluster runs until Stop. On failure the process is gone
// and the error carries the tail of kubesim's stderr.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("kubesim: Config.DataDir is required")
	}
	bin := cfg.Binary
	if bin == "" {
		var err error
		if bin, err = FindBinary(); err != nil {
			return nil, err
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}

	c := &Cluster{tail: newTailWriter(30), done: make(chan struct{})}
	c.cmd = exec.Command(bin, cfg.args()...)
	c.cmd.SysProcAttr = sysProcAttr()
	stderr := io.Writer(c.tail)
	if cfg.Stderr != nil {
		stderr = io.MultiWriter(cfg.Stderr, c.tail)
	}
	c.cmd.Stderr = stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("kubesim: %w", err)
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubesim: start %s: %w", bin, err)
	}
	c.PID = c.cmd.Process.Pid

	ready := make(chan readyLine, 1)
	go c.readStdout(stdout, ready)
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()

	select {
	case line := <-ready:
		c.Name, c.Endpoint, c.Kubeconfig = line.Name, line.Endpoint, line.Kubeconfig
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("kubesim: exited before ready (%w): %s", c.err, c.tail.String())
	case <-ctx.Done():
		stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = c.Stop(stopCtx)
		return nil, fmt.Errorf("kubesim: not ready: %w: %s", ctx.Err(), c.tail.String())
	}
}

// readStdout hands the first ready line to ready, then drains stdout so
// that kubesim never blocks writing to it.
func (c *Cluster) readStdout(r io.Reader, ready chan<- readyLine) {
	sc := bufio.NewScanner(r)
	sent := false
	for sc.Scan() {
		var line readyLine
		if !sent && json.Unmarshal(sc.Bytes(), &line) == nil && line.Ready {
			ready <- line
			sent = true
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// Stop sends SIGTERM and waits for kubesim to stop every part. If ctx ends
// first, it sends SIGKILL (kubesim's parts die with it) and waits for the
// process. It returns nil when kubesim stopped cleanly.
func (c *Cluster) Stop(ctx context.Context) error {
	select {
	case <-c.done:
		return c.exitErr()
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kubesim: stop pid %d: %w", c.PID, err)
	}
	select {
	case <-c.done:
		return c.exitErr()
	case <-ctx.Done():
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("kubesim: killed pid %d after %w", c.PID, ctx.Err())
	}
}

// Wait blocks until kubesim exits and returns its exit error, with the tail
// of its stderr if it failed.
func (c *Cluster) Wait() error {
	<-c.done
	return c.exitErr()
}

func (c *Cluster) exitErr() error {
	if c.err == nil {
		return nil
	}
	return fmt.Errorf("kubesim: pid %d: %w: %s", c.PID, c.err, c.tail.String())
}

func (cfg Config) args() []string {
	args := []string{"run", "--data-dir", cfg.DataDir}
	if cfg.Name != "" {
		args = append(args, "--name", cfg.Name)
	}
	if cfg.Region != "" {
		args = append(args, "--region", cfg.Region)
	}
	if len(cfg.Zones) > 0 {
		args = append(args, "--zones", strings.Join(cfg.Zones, ","))
	}
	if cfg.Nodes > 0 {
		args = append(args, "--nodes", strconv.Itoa(cfg.Nodes))
	}
	if cfg.Port > 0 {
		args = append(args, "--port", strconv.Itoa(cfg.Port))
	}
	return args
}

// tailWriter keeps the last lines written to it.
type tailWriter struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  string
}

func newTailWriter(max int) *tailWriter { return &tailWriter{max: max} }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.part + string(p)
	lines := strings.Split(s, "\n")
	t.part = lines[len(lines)-1]
	t.lines = append(t.lines, lines[:len(lines)-1]...)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
	return len(p), nil
}

// String returns the kept lines joined by " | " so that the error stays on
// one line; it favours the last lines, which name the cause.
func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if t.part != "" {
		lines = append(lines[:len(lines):len(lines)], t.part)
	}
	if len(lines) == 0 {
		return "(no output on stderr)"
	}
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "stderr tail: " + strings.Join(lines, " | ")
}

// Running reports whether the kubesim process has not exited.
func (c *Cluster) Running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}
