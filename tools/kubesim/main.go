// Command kubesim runs a real Kubernetes control plane on one machine with no
// container runtime: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, which plays the nodes and the pod lifecycle.
//
//	kubesim run --data-dir DIR [--name NAME] [--region REGION] [--zones a,b,c] [--nodes N] [--port P]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"
)

const usage = `usage: kubesim run --data-dir DIR [--name NAME] [--region REGION] [--zones a,b,c] [--nodes N] [--port P]

Runs a local Kubernetes control plane whose nodes are simulated by kwok.
When the cluster is ready, one JSON line is printed on stdout:
  {"ready":true,"name":...,"endpoint":...,"kubeconfig":...}
SIGTERM or SIGINT stops it. Logs go to stderr and DIR/logs.
`

func main() {
	os.Exit(kubesimMain(os.Args[1:], os.Stdout, os.Stderr))
}

// kubesimMain dispatches to `run` or to a hidden part subcommand, and
// returns the exit code.
func kubesimMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if _, ok := partMains[args[0]]; ok {
		return runPart(args[0], args[1:])
	}
	switch args[0] {
	case "run":
		return runMain(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "kubesim: unknown command %q (want: run)\n", args[0])
		return 2
	}
}

func runMain(args []string, stdout, stderr io.Writer) int {
	opts, err := parseRunFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "kubesim: run: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signalContext()
	defer stop()
	if err := runCluster(ctx, opts, stdout, log); err != nil {
		fmt.Fprintf(stderr, "kubesim: %s\n", oneLine(err.Error()))
		return 1
	}
	return 0
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$`)

func parseRunFlags(args []string) (runOptions, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var opts runOptions
	var zones string
	fs.StringVar(&opts.DataDir, "data-dir", "", "data directory (required)")
	fs.StringVar(&opts.Name, "name", "", `cluster name (default: as before, or "kubesim")`)
	fs.StringVar(&opts.Region, "region", "", `topology.kubernetes.io/region of the nodes (default: as before, or "local")`)
	fs.StringVar(&zones, "zones", "", "comma-separated zones, given to nodes round-robin (default: REGION-a,REGION-b,REGION-c)")
	fs.IntVar(&opts.Nodes, "nodes", 0, "number of nodes (default: as before, or 3)")
	fs.IntVar(&opts.Port, "port", 0, "API server port on 127.0.0.1 (default 0: as before if free, else any free port)")
	fs.DurationVar(&opts.StartupTimeout, "startup-timeout", 2*time.Minute, "how long start-up may take")
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	if fs.NArg() > 0 {
		return opts, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if opts.DataDir == "" {
		return opts, errors.New("--data-dir is required")
	}
	if opts.Name != "" && !nameRE.MatchString(opts.Name) {
		return opts, fmt.Errorf("--name %q: want lower-case letters, digits and '-', at most 42 characters", opts.Name)
	}
	if opts.Nodes < 0 || opts.Nodes > 500 {
		return opts, fmt.Errorf("--nodes %d: want 1 to 500", opts.Nodes)
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return opts, fmt.Errorf("--port %d: want 0 to 65535", opts.Port)
	}
	if zones != "" {
		for _, z := range strings.Split(zones, ",") {
			if z = strings.TrimSpace(z); z == "" {
				return opts, fmt.Errorf("--zones %q: empty zone", zones)
			}
			opts.Zones = append(opts.Zones, strings.TrimSpace(z))
		}
	}
	return opts, nil
}
