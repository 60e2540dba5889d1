package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// startHealth serves the controller-only mode's probes and metrics on cfg.HealthListen: /healthz (the
// process runs and no part failed), /readyz (every part started and the broker connected) and
// /metrics (the reconcile metrics). The API serves its own; this is for `qleet controller`, which has
// no HTTP server otherwise. The address takes no token: bind it to the pod network only, and let a
// NetworkPolicy say who may scrape it.
func (a *App) startHealth(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", a.cfg.HealthListen)
	if err != nil {
		return fmt.Errorf("health listen on %s: %w", a.cfg.HealthListen, err)
	}
	a.HealthEndpoint = "http://" + endpointAddr(ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Err(); err != nil {
			http.Error(w, "a part failed: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := a.ready(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.fail(fmt.Errorf("health server: %w", err))
		}
	}()
	// Close cancels ctx before it waits for the App's goroutines.
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return nil
}
