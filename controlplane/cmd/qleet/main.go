// Command qleet is the QleetOS control plane and its CLI.
//
//	qleet server      run everything in one process (API, relay, controllers, embedded NATS, SQLite)
//	qleet api         run the API server and outbox relay (scale-out)
//	qleet controller  run the controllers against a remote API (scale-out)
//	qleet get|describe|delete|events <kind> [name]
//	qleet image set <definition> <container> <image>
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `qleet: the QleetOS control plane and CLI

Usage:
  qleet server     [--data-dir DIR] [--listen ADDR]             run everything in one process
  qleet api        --database-url URL --nats-url URL [--listen ADDR] [--data-dir DIR]
  qleet controller --api-endpoint URL --token TOKEN --nats-url URL
  qleet get        <kind> [name] [-o table|json]
  qleet describe   <kind> <name> [--trace]                       --trace: the hops of its last reconcile, timed
  qleet delete     <kind> <name> [--cascade] [--orphan] [--wait]
  qleet events     <kind> <name>
  qleet image set  <definition> <container> <image>
  qleet graph      [<kind> <name>] [-o table|json]               the dependency graph, as trees
  qleet pods       <instance>                                    pods of an instance in its clusters
  qleet reconcile  <kind> <name>                                 ask the controller to reconcile now
  qleet token create --name NAME --role ROLE [--ttl 720h]        make an API token (shown once; admin)
  qleet token list | revoke <id>                                 list or revoke API tokens (admin)
  qleet agent      --runtime NAME [--endpoint URL] [--kubeconfig PATH]   run the status agent (QLEET_TOKEN)
  qleet agent install --runtime NAME [--endpoint URL]            print the manifests that run the agent in-cluster

Kinds: kubernetes_runtime(s), runtime_profile(s), workload_definition(s), workload_instance(s), gateway(s),
domain_name(s), support_service(s), secret(s) (short: runtime, profile, definition, instance, gateway, domain,
support).
CLI verbs read QLEET_ENDPOINT (default http://127.0.0.1:8080), QLEET_TOKEN (default: the admin token in
the data dir) and QLEET_CA_CERT (the CA certificate of a TLS endpoint). Flags may also be given as QLEET_<FLAG> environment variables, e.g. QLEET_DATA_DIR.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "qleet: %v (run 'qleet help' for usage)\n", err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "qleet: %v\n", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Print(usage)
		return nil
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "server":
		return runServer(ctx, rest, modeServer)
	case "api":
		return runServer(ctx, rest, modeAPI)
	case "controller":
		return runServer(ctx, rest, modeController)
	case "get", "describe", "delete", "events":
		return runCLI(ctx, cmd, rest)
	case "image":
		return runImage(ctx, rest)
	case "graph":
		return runGraph(ctx, rest)
	case "pods":
		return runPods(ctx, rest)
	case "agent":
		return runAgent(ctx, rest)
	case "reconcile":
		return runReconcile(ctx, rest)
	case "token":
		return runToken(ctx, rest)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	default:
		return usageError{fmt.Sprintf("unknown command %q", cmd)}
	}
}
