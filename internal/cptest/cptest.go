// Package cptest starts a whole QleetOS control plane in-process for tests: SQLite, embedded NATS, the
// API server and the controllers, in the test's temporary directory, closed in t.Cleanup.
package cptest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
)

// Start starts a control plane with fast resync intervals. cfg fields left zero get test defaults: a
// temporary data dir, a free port, API and controllers both on.
func Start(t testing.TB, cfg app.Config) (*app.App, *client.Client) {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if !cfg.API && !cfg.Controllers {
		cfg.API, cfg.Controllers = true, true
	}
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = 2 * time.Second
	}
	if cfg.DriftInterval == 0 {
		cfg.DriftInterval = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = Logger()
	}
	if cfg.SupportChartDir == "" {
		cfg.SupportChartDir = SupportCharts()
	}
	a, err := app.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("cptest: start control plane: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a.Close(ctx)
	})
	cl, err := a.Client()
	if err != nil {
		t.Fatalf("cptest: client: %v", err)
	}
	return a, cl
}

// SupportCharts returns the repository's local support service charts (charts/support), which tests
// install instead of the upstream charts they cannot download.
func SupportCharts() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "charts", "support")
}

// Config returns the zero configuration; Start fills in test defaults.
func Config() app.Config { return app.Config{} }

// Logger discards logs unless QLEET_TEST_LOG=1.
func Logger() *slog.Logger {
	if os.Getenv("QLEET_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Kubeconfig reads a kubeconfig file, failing the test if it cannot.
func Kubeconfig(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cptest: read kubeconfig: %v", err)
	}
	return string(data)
}

// Wait returns a context that ends after d, cancelled at cleanup.
func Wait(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
