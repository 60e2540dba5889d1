package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry/tracing"
)

type mode int

const (
	modeServer mode = iota
	modeAPI
	modeController
)

// envDefault returns $QLEET_<NAME> or def.
func envDefault(name, def string) string {
	if v := os.Getenv("QLEET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); v != "" {
		return v
	}
	return def
}

func runServer(ctx context.Context, args []string, m mode) error {
	fs := flag.NewFlagSet("qleet", flag.ContinueOnError)
	dataDir := fs.String("data-dir", envDefault("data-dir", ".qleet"), "data directory (database, NATS store, tokens, local clusters)")
	listen := fs.String("listen", envDefault("listen", "127.0.0.1:8080"), "API listen address")
	dbURL := fs.String("database-url", envDefault("database-url", ""), "PostgreSQL URL (default: SQLite in the data dir)")
	natsURL := fs.String("nats-url", envDefault("nats-url", ""), "external NATS URL (default: embedded)")
	apiEndpoint := fs.String("api-endpoint", envDefault("api-endpoint", ""), "API endpoint (controller mode)")
	token := fs.String("token", envDefault("token", ""), "controller token (controller mode)")
	workers := fs.Int("workers", app.DefaultWorkers, "reconcile workers per kind (reconciles mostly wait on the network)")
	resync := fs.Duration("resync", 30*time.Second, "resync interval for objects that are not reconciled")
	drift := fs.Duration("drift-interval", 60*time.Second, "how often Ready objects are re-checked for drift")
	failedRecheck := fs.Duration("failed-recheck", 5*time.Minute, "how often Failed objects are reconciled again, so that a fixed world heals")
	cleanupGrace := fs.Duration("cleanup-grace", 2*time.Minute, "how long a deletion waits for an unreachable cluster before it offers orphaning")
	scaleDownDelay := fs.Duration("scale-down-delay", 2*time.Minute, "how long a node added by node autoscaling must be idle before it is removed")
	ownerGrace := fs.Duration("owner-grace", 5*time.Minute, "how long an object created for owners (a runtime provisioned from a profile) outlives them before it is garbage-collected")
	progressDeadline := fs.Duration("progress-deadline", 10*time.Minute, "how long a rollout may make no progress before it is Stalled")
	tlsCert := fs.String("tls-cert", envDefault("tls-cert", ""), "TLS certificate file (default: self-signed in the data dir when not on loopback)")
	tlsKey := fs.String("tls-key", envDefault("tls-key", ""), "TLS key file")
	var tlsSANs stringList
	fs.Var(&tlsSANs, "tls-san", "an extra DNS name or IP address for the self-signed certificate (repeatable)")
	metricsAuth := fs.String("metrics-auth", envDefault("metrics-auth", "auto"), "whether /metrics needs a token: auto (when listening beyond loopback), on or off")
	apiCA := fs.String("api-ca-cert", envDefault("api-ca-cert", ""), "CA certificate of a TLS API (controller mode)")
	secretKey := fs.String("secret-key-file", envDefault("secret-key-file", ""), "file with the base64 key that encrypts secrets at rest; API replicas must share it (default: made in the data dir)")
	supportCharts := fs.String("support-chart-dir", envDefault("support-chart-dir", ""), "local charts for support services by type (<dir>/ingress, <dir>/cert-manager, ...), used instead of the upstream chart repositories; the repository's charts/support works offline")
	chartDir := fs.String("chart-dir", envDefault("chart-dir", ""), "the only directory local Helm charts are read from (default: <data-dir>/charts)")
	logLevel := fs.String("log-level", envDefault("log-level", "info"), "debug, info, warn or error")
	traceBuffer := fs.Int("trace-buffer", tracing.DefaultRecentSpans, "how many recent trace spans to keep in memory for 'qleet describe --trace' (0: none; with no OTEL_* exporter either, tracing is off)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{fmt.Sprintf("--log-level: %v", err)}
	}
	logger := slog.New(telemetry.LogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
	recent := *traceBuffer
	if recent == 0 {
		recent = -1 // tracing.Config: 0 is the default size, negative keeps none
	}
	tr, err := tracing.Setup(ctx, tracing.Config{ServiceName: "qleet-" + modeName(m), RecentSpans: recent})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			logger.Warn("trace export flush failed", "error", err)
		}
	}()
	if tr.Exporting != "" {
		logger.Info("exporting traces", "exporter", tr.Exporting)
	}
	cfg := app.Config{
		DataDir: *dataDir, Listen: *listen, DatabaseURL: *dbURL, NATSURL: *natsURL,
		APIEndpoint: *apiEndpoint, ControllerToken: *token, APICACertFile: *apiCA,
		TLSCertFile: *tlsCert, TLSKeyFile: *tlsKey, TLSSANs: tlsSANs, MetricsAuth: *metricsAuth, SecretKeyFile: *secretKey,
		Workers: *workers, ResyncInterval: *resync, DriftInterval: *drift, Logger: logger,
		ChartDir: *chartDir, FailedRecheckInterval: *failedRecheck, ProgressDeadline: *progressDeadline, CleanupGrace: *cleanupGrace,
		ScaleDownDelay: *scaleDownDelay, OwnerGrace: *ownerGrace, SupportChartDir: *supportCharts,
		API: m != modeController, Controllers: m != modeAPI,
	}
	if tr.Recent != nil {
		cfg.Traces = tr.Recent
	}
	start := time.Now()
	a, err := app.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if a.Endpoint != "" {
		fmt.Printf("qleet %s ready in %s\n  endpoint:    %s\n  admin token: %s\n", modeName(m), time.Since(start).Round(time.Millisecond), a.Endpoint, a.AdminTokenPath)
		if a.CACertPath != "" {
			fmt.Printf("  ca cert:     %s (clients: QLEET_CA_CERT)\n", a.CACertPath)
		}
	} else {
		fmt.Printf("qleet controller ready in %s, serving %s\n", time.Since(start).Round(time.Millisecond), cfg.APIEndpoint)
	}
	err = a.Run(ctx)
	fmt.Fprintln(os.Stderr, "qleet: stopped")
	return err
}

func modeName(m mode) string {
	switch m {
	case modeAPI:
		return "api"
	case modeController:
		return "controller"
	default:
		return "server"
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set adds a value.
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
