// Command chaos runs the chaos test of the scale-out topology (package internal/chaos) one or more times
// in a row, prints each run's figures, and writes them to docs/reliability.json and docs/reliability.md.
// `make chaos` builds bin/qleet and bin/nats-server and runs it.
//
//	chaos [-runs 3] [-writes 1000] [-writers 4] [-rate 6] [-kills 2] [-downtime 2s] [-within 15s] [-log-level info] [-seed N] [-work DIR] [-json PATH] [-md PATH]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/qleetos/terraform-provider-qleet/internal/chaos"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// summary is what docs/reliability.json holds.
type summary struct {
	Command              string          `json:"command"`
	Date                 string          `json:"date"`
	Runs                 []*chaos.Report `json:"runs"`
	Green                int             `json:"green_in_a_row"`
	WorstConvergence     float64         `json:"worst_convergence_seconds"`
	TotalLost            int             `json:"lost"`
	TotalOverlaps        int             `json:"overlaps"`
	TotalOrphans         int             `json:"orphans"`
	ConvergeWithinSecond float64         `json:"converge_within_seconds"`
}

func run() error {
	runs := flag.Int("runs", 1, "runs in a row; stops at the first that fails")
	writes := flag.Int("writes", 1000, "acknowledged writes per run")
	writers := flag.Int("writers", 4, "concurrent writers")
	rate := flag.Float64("rate", 6, "writes per second, all writers together")
	kills := flag.Int("kills", 2, "kills of each part per run")
	downtime := flag.Duration("downtime", 2*time.Second, "longest outage of a killed part")
	within := flag.Duration("within", 15*time.Second, "the convergence promise checked")
	logLevel := flag.String("log-level", "info", "the API's and controllers' log level (debug, info, warn, error)")
	seed := flag.Uint64("seed", 0, "seed of the first run (0: random); run i uses seed+i")
	work := flag.String("work", "", "work dir (default: a new temporary dir, removed after a green run)")
	qleet := flag.String("qleet", "bin/qleet", "qleet binary")
	nats := flag.String("nats-server", "bin/nats-server", "nats-server binary")
	kubesimBin := flag.String("kubesim", "", "kubesim binary (default: bin/kubesim or $QLEET_KUBESIM)")
	jsonPath := flag.String("json", "docs/reliability.json", "where to write the figures as JSON (empty: nowhere)")
	mdPath := flag.String("md", "docs/reliability.md", "where to write the figures as Markdown (empty: nowhere)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	qbin, err := filepath.Abs(*qleet)
	if err != nil {
		return err
	}
	nbin, err := filepath.Abs(*nats)
	if err != nil {
		return err
	}
	sum := &summary{Command: "chaos " + strings.Join(os.Args[1:], " "), Date: time.Now().UTC().Format(time.RFC3339)}
	var failed error
	for i := range *runs {
		dir := *work
		if dir == "" {
			if dir, err = os.MkdirTemp("", "qleet-chaos-"); err != nil {
				return err
			}
		} else {
			dir = filepath.Join(dir, fmt.Sprintf("run%d", i))
		}
		s := *seed
		if s != 0 {
			s += uint64(i)
		}
		fmt.Printf("run %d of %d (work dir %s)\n", i+1, *runs, dir)
		rep, err := chaos.Run(ctx, chaos.Config{
			Writes: *writes, Writers: *writers, Rate: *rate, KillsPerPart: *kills, Seed: s,
			Downtime: *downtime, ConvergeWithin: *within, LogLevel: *logLevel,
			QleetBinary: qbin, NATSBinary: nbin, KubesimBinary: *kubesimBin, WorkDir: dir,
			Logf: func(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) },
		})
		if rep != nil {
			sum.Runs = append(sum.Runs, rep)
			printReport(rep)
		}
		if err == nil && !rep.OK() {
			err = fmt.Errorf("run %d: %s", i+1, strings.Join(rep.Problems, "; "))
		}
		if err != nil {
			failed = fmt.Errorf("run %d (work dir %s kept): %w", i+1, dir, err)
			break
		}
		sum.Green++
		if *work == "" {
			_ = os.RemoveAll(dir)
		}
	}
	for _, r := range sum.Runs {
		sum.WorstConvergence = max(sum.WorstConvergence, r.ConvergenceSeconds)
		sum.TotalLost += r.Lost
		sum.TotalOverlaps += r.Overlaps
		sum.TotalOrphans += r.Orphans
		sum.ConvergeWithinSecond = r.ConvergeWithinSeconds
	}
	if err := write(sum, *jsonPath, *mdPath); err != nil {
		return err
	}
	return failed
}

func printReport(r *chaos.Report) {
	fmt.Printf("  seed %d: writes %d (%v), retries %d, kills %v\n", r.Seed, r.Writes, r.WritesByOp, r.Retries, r.Kills)
	fmt.Printf("  lost %d, overlaps %d (of %d lock spans), orphans %d, convergence %.1fs (promise %.0fs), %d instances and %d definitions at the end\n",
		r.Lost, r.Overlaps, r.LockSpans, r.Orphans, r.ConvergenceSeconds, r.ConvergeWithinSeconds, r.Instances, r.Definitions)
	for _, p := range r.Problems {
		fmt.Println("  PROBLEM:", p)
	}
}

func write(sum *summary, jsonPath, mdPath string) error {
	if jsonPath != "" {
		b, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if mdPath == "" {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Reliability: chaos runs\n\n")
	fmt.Fprintf(&b, "Generated by `make chaos` (`%s`) on %s; the figures are also in [reliability.json](reliability.json).\n\n", sum.Command, sum.Date)
	fmt.Fprintf(&b, "Each run starts the scale-out topology on one machine: PostgreSQL, three nats-servers in a cluster (the reconcile\n"+
		"stream and the lock bucket with three replicas), two `qleet api` replicas behind a TCP load balancer, three `qleet controller`\n"+
		"replicas, and a kubesim cluster registered as a kubeconfig runtime. Writers create, update and delete workload definitions\n"+
		"and instances through the Go client, retrying as a user would (a failed write is tried again; a create whose name is taken\n"+
		"was an earlier attempt that went through), while an API replica, a controller replica, a NATS server, the NATS server that\n"+
		"leads a reconcile consumer or the lock bucket (in turns, found through the JetStream API) and PostgreSQL are each killed\n"+
		"with SIGKILL and started again, at random, spread over the writes. Then the run checks:\n\n"+
		"- **lost**: acknowledged writes not reflected in the API and in the cluster (each live instance Ready at its generation,\n"+
		"  its Deployment with the replicas and the definition's image last written; deleted ones gone from both);\n"+
		"- **overlaps**: two holds of one object's reconcile lock that overlapped in time, from the lock-span logs the controllers\n"+
		"  write (`QLEET_LOCK_SPAN_LOG`); a hold of a killed controller ends at its kill;\n"+
		"- **orphans**: Deployments and Namespaces labelled as QleetOS's whose instance the API does not know;\n"+
		"- **convergence**: time from the later of the last restart and the last acknowledged write until all of the above hold.\n\n")
	fmt.Fprintf(&b, "Green in a row: **%d** of %d. Lost **%d**, overlaps **%d**, orphans **%d**, worst convergence **%.1f s** (promise: %.0f s).\n\n",
		sum.Green, len(sum.Runs), sum.TotalLost, sum.TotalOverlaps, sum.TotalOrphans, sum.WorstConvergence, sum.ConvergeWithinSecond)
	fmt.Fprintf(&b, "| run | seed | writes | retries | kills api / controller / nats / nats leader / postgres | lock spans | lost | overlaps | orphans | convergence (s) | write phase (s) |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range sum.Runs {
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %d / %d / %d / %d / %d | %d | %d | %d | %d | %.1f | %.0f |\n", i+1, r.Seed, r.Writes, r.Retries,
			r.Kills["api"], r.Kills["controller"], r.Kills["nats"], r.Kills["nats-leader"], r.Kills["postgres"], r.LockSpans, r.Lost, r.Overlaps, r.Orphans,
			r.ConvergenceSeconds, r.DurationSeconds)
	}
	for i, r := range sum.Runs {
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "\nRun %d problem: %s\n", i+1, p)
		}
	}
	return os.WriteFile(mdPath, []byte(b.String()), 0o644)
}
