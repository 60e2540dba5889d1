package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry/tracing"
)

type mode int

const (
	modeServer mode = iota
	modeAPI
	modeController
)

// serverCmd builds `qleet server`, `qleet api` or `qleet controller`: the same flags, different halves of
// the control plane.
func (q *cli) serverCmd(use string, m mode, short string) *cobra.Command {
	var (
		dataDir, listen, dbURL, natsURL, apiEndpoint, token, tlsCert, tlsKey, metricsAuth, apiCA string
		secretKey, supportCharts, chartDir, logLevel, lockSpanLog, healthListen, chartMirror     string
		workers, traceBuffer, natsReplicas                                                       int
		resync, drift, failedRecheck, cleanupGrace, scaleDownDelay, ownerGrace, progress         time.Duration
		tlsSANs                                                                                  []string
		maxReplicas                                                                              map[string]int
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

Every flag may also be given as a QLEET_<FLAG> environment variable, e.g. QLEET_DATA_DIR for --data-dir;
a flag on the command line wins.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := q.flagsFromEnv(cmd); err != nil {
				return err
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usagef("--log-level: %v", err)
			}
			if u, err := url.Parse(chartMirror); chartMirror != "" && (err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "oci")) {
				return usagef("--support-chart-mirror: must be an http, https or oci URL, not %q", chartMirror)
			}
			if natsReplicas < 0 || natsReplicas > 5 {
				return usagef("--nats-replicas: must be between 0 and 5, not %d", natsReplicas)
			}
			var lockSpans io.Writer
			if lockSpanLog != "" && m != modeAPI {
				f, err := os.OpenFile(lockSpanLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
				if err != nil {
					return fmt.Errorf("--lock-span-log: %w", err)
				}
				defer func() { _ = f.Close() }()
				lockSpans = f
			}
			return serve(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), m, lvl, traceBuffer, app.Config{
				DataDir: dataDir, Listen: listen, DatabaseURL: dbURL, NATSURL: natsURL, NATSReplicas: natsReplicas, LockSpans: lockSpans,
				APIEndpoint: apiEndpoint, ControllerToken: token, APICACertFile: apiCA, HealthListen: healthListen,
				TLSCertFile: tlsCert, TLSKeyFile: tlsKey, TLSSANs: tlsSANs, MetricsAuth: metricsAuth, SecretKeyFile: secretKey,
				Workers: workers, ResyncInterval: resync, DriftInterval: drift,
				ChartDir: chartDir, FailedRecheckInterval: failedRecheck, ProgressDeadline: progress, CleanupGrace: cleanupGrace,
				ScaleDownDelay: scaleDownDelay, OwnerGrace: ownerGrace, SupportChartDir: supportCharts, SupportChartMirror: chartMirror,
				API: m != modeController, Controllers: m != modeAPI, MaxReplicasPerRole: maxReplicas,
			})
		},
	}
	switch m {
	case modeAPI:
		cmd.Example = "  qleet api --database-url postgres://qleet@db/qleet --nats-url nats://nats:4222 --listen 0.0.0.0:8443"
	case modeController:
		cmd.Example = "  qleet controller --api-endpoint https://qleet:8443 --token qlt_... --api-ca-cert ca.crt --nats-url nats://nats:4222"
	default:
		cmd.Example = "  qleet server                                   # in ./.qleet, on 127.0.0.1:8080\n  qleet server --data-dir /var/lib/qleet --listen 0.0.0.0:8443"
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&dataDir, "data-dir", ".qleet", "data directory (database, NATS store, tokens, local clusters)")
	fs.StringVar(&listen, "listen", "127.0.0.1:8080", "API listen address")
	fs.StringVar(&dbURL, "database-url", "", "PostgreSQL URL (default: SQLite in the data dir)")
	fs.StringVar(&natsURL, "nats-url", "", "external NATS URL (default: embedded); a comma-separated list reaches every server of a cluster")
	fs.IntVar(&natsReplicas, "nats-replicas", 0, "replicas of the reconcile stream and the lock bucket on an external NATS cluster, e.g. 3 (0: an existing stream keeps its count, a new one gets 1)")
	fs.StringVar(&apiEndpoint, "api-endpoint", "", "API endpoint (controller mode)")
	fs.StringVar(&token, "token", "", "controller token (controller mode)")
	fs.IntVar(&workers, "workers", app.DefaultWorkers, "reconcile workers per kind (reconciles mostly wait on the network)")
	fs.DurationVar(&resync, "resync", 30*time.Second, "how soon after a notification may have been lost (a failed publish, a peer replica gone) the objects that are not reconciled are enqueued again; no pass runs otherwise")
	fs.DurationVar(&drift, "drift-interval", reconcile.DefaultDriftInterval, "how often every object is enqueued again: the safety net behind the clusters' watch events, which bring drift at once")
	fs.DurationVar(&failedRecheck, "failed-recheck", 5*time.Minute, "how often Failed objects are reconciled again, so that a fixed world heals")
	fs.DurationVar(&cleanupGrace, "cleanup-grace", 2*time.Minute, "how long a deletion waits for an unreachable cluster before it offers orphaning")
	fs.DurationVar(&scaleDownDelay, "scale-down-delay", 2*time.Minute, "how long a node added by node autoscaling must be idle before it is removed")
	fs.DurationVar(&ownerGrace, "owner-grace", 5*time.Minute, "how long an object created for owners (a runtime provisioned from a profile) outlives them before it is garbage-collected")
	fs.DurationVar(&progress, "progress-deadline", 5*time.Minute, "how long a rollout may make no progress before it is Stalled (a pod unschedulable for 30s stalls it sooner)")
	fs.StringVar(&tlsCert, "tls-cert", "", "TLS certificate file (default: self-signed in the data dir when not on loopback)")
	fs.StringVar(&tlsKey, "tls-key", "", "TLS key file")
	fs.StringArrayVar(&tlsSANs, "tls-san", nil, "an extra DNS name or IP address for the self-signed certificate (repeatable)")
	fs.StringVar(&metricsAuth, "metrics-auth", "auto", "whether /metrics needs a token: auto (when listening beyond loopback), on or off")
	fs.StringVar(&apiCA, "api-ca-cert", "", "CA certificate of a TLS API (controller mode)")
	fs.StringVar(&healthListen, "health-listen", "", "address of /healthz, /readyz and /metrics, with no token (controller mode; e.g. :8081; default: none)")
	fs.StringVar(&secretKey, "secret-key-file", "", "file with the base64 key that encrypts secrets at rest; API replicas must share it (default: made in the data dir)")
	fs.StringVar(&supportCharts, "support-chart-dir", "", "local charts for support services by type (<dir>/ingress, <dir>/cert-manager, ...), used instead of the upstream chart repositories; the repository's charts/support works offline")
	fs.StringVar(&chartMirror, "support-chart-mirror", "", "a chart repository (https, http or oci URL) holding the pinned upstream support charts under their own names and versions, used instead of their upstream repositories (air-gapped)")
	fs.StringVar(&chartDir, "chart-dir", "", "the only directory local Helm charts are read from (default: <data-dir>/charts)")
	fs.StringToIntVar(&maxReplicas, "max-replicas", nil, "per-role replica limits, e.g. developer=50,viewer=0: a token of the role may ask for at most that many replicas (every role is held to the API's limit of 1000)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&lockSpanLog, "lock-span-log", "", "append a JSON line per reconcile lock held (holder, object, start, end) to this file, for checking that no object is reconciled twice at once (make chaos)")
	fs.IntVar(&traceBuffer, "trace-buffer", tracing.DefaultRecentSpans, "how many recent trace spans to keep in memory for 'qleet describe --trace' (0: none; with no OTEL_* exporter either, tracing is off)")
	_ = cmd.RegisterFlagCompletionFunc("log-level", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("metrics-auth", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"auto", "on", "off"}, cobra.ShellCompDirectiveNoFileComp
	})
	for _, f := range []string{"data-dir", "chart-dir", "support-chart-dir"} {
		_ = cmd.MarkFlagDirname(f)
	}
	if m == modeServer {
		cmd.AddCommand(q.rotateKeysCmd())
	}
	return cmd
}

// flagsFromEnv gives every flag not set on the command line the value of its QLEET_<FLAG> environment
// variable, when that is set.
func (q *cli) flagsFromEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		env := "QLEET_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := q.getenv(env); v != "" {
			if serr := f.Value.Set(v); serr != nil {
				err = usagef("%s: %v", env, serr)
			}
		}
	})
	return err
}

// serve starts the control plane and runs it until ctx ends.
func serve(ctx context.Context, stdout, stderr io.Writer, m mode, lvl slog.Level, traceBuffer int, cfg app.Config) error {
	logger := slog.New(telemetry.LogHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})))
	cfg.Logger = logger
	if gc, fromEnv := app.TuneGC(); fromEnv {
		logger.Debug("garbage collector target from GOGC", "percent", gc)
	}
	go app.ReleaseMemoryWhenIdle(ctx)
	recent := traceBuffer
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
	if tr.Recent != nil {
		cfg.Traces = tr.Recent
	}
	start := time.Now()
	a, err := app.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if a.Endpoint != "" {
		fmt.Fprintf(stdout, "qleet %s ready in %s\n  endpoint:    %s\n  admin token: %s\n", modeName(m), time.Since(start).Round(time.Millisecond), a.Endpoint, a.AdminTokenPath)
		if a.CACertPath != "" {
			fmt.Fprintf(stdout, "  ca cert:     %s (clients: QLEET_CA_CERT)\n", a.CACertPath)
		}
	} else {
		fmt.Fprintf(stdout, "qleet controller ready in %s, serving %s\n", time.Since(start).Round(time.Millisecond), cfg.APIEndpoint)
	}
	err = a.Run(ctx)
	fmt.Fprintln(stderr, "qleet: stopped")
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
