package suite

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/qleetos/terraform-provider-qleet/bench/report"
	"github.com/qleetos/terraform-provider-qleet/bench/stats"
)

// runColdStart times `qleet server` from exec to the first 200 from /readyz: cold (an empty data dir: it
// creates the database, the NATS store and the tokens) and warm (the same data dir again).
func (r *Runner) runColdStart(ctx context.Context) error {
	if !isFile(r.cfg.QleetBinary) {
		r.res.ColdStart = append(r.res.ColdStart, report.ColdStartRow{Case: "cold (empty data dir)", Skipped: "qleet binary not found at " + r.cfg.QleetBinary + " (make build)"})
		return nil
	}
	var cold, warm []time.Duration
	for i := range r.cfg.ColdStarts {
		dir := filepath.Join(r.cfg.WorkDir, fmt.Sprintf("coldstart-%d", i))
		for _, c := range []struct {
			into *[]time.Duration
		}{{&cold}, {&warm}} {
			d, err := r.startQleetOnce(ctx, dir)
			if err != nil {
				return err
			}
			*c.into = append(*c.into, d)
		}
	}
	r.res.ColdStart = append(r.res.ColdStart,
		report.ColdStartRow{Case: "cold (empty data dir)", Latency: stats.Summarize(cold)},
		report.ColdStartRow{Case: "warm (existing data dir)", Latency: stats.Summarize(warm)})
	return nil
}

// startQleetOnce runs `qleet server` on dir, returns how long it took until /readyz answered 200, and
// stops it.
func (r *Runner) startQleetOnce(ctx context.Context, dir string) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.CommandContext(ctx, r.cfg.QleetBinary, "server", "--data-dir", dir, "--listen", addr, "--log-level", "error")
	cmd.Stdout, cmd.Stderr = nil, nil
	cmd.Env = os.Environ()
	hc := &http.Client{Timeout: time.Second}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start qleet server: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	defer func() {
		if exited {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			_ = err // the exit status of a server we stopped says nothing
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			err := <-done
			_ = err
		}
	}()
	deadline := t0.Add(60 * time.Second)
	for {
		resp, err := hc.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(t0), nil
			}
		}
		select {
		case err := <-done:
			exited = true
			return 0, fmt.Errorf("qleet server exited before ready: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("qleet server not ready after 60s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
