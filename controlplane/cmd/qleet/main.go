// Command qleet is the QleetOS control plane and its CLI.
//
//	qleet server      run everything in one process (API, relay, controllers, embedded NATS, SQLite)
//	qleet api         run the API server and outbox relay (scale-out)
//	qleet controller  run the controllers against a remote API (scale-out)
//	qleet agent       run the status agent of one runtime
//	qleet get|describe|delete|events|graph|pods|reconcile|plan ...   the CLI verbs
//	qleet login|config|token|completion|version                        settings
//
// The commands are built with cobra; `qleet <command> --help` documents each.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/qleetos/terraform-provider-qleet/internal/redact"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// run executes one qleet command line and returns its exit code: 0 on success, 1 when the command
// failed, 2 when the command line is wrong. getenv reads the environment, so that tests run commands
// in-process with an environment of their own.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	q := &cli{getenv: getenv}
	root := q.rootCmd()
	root.SetArgs(compatArgs(root, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		path := "qleet"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(stderr, "qleet: %s (see '%s --help')\n", redact.URLs(err.Error()), path)
		return exitUsage
	}
	fmt.Fprintf(stderr, "qleet: %s\n", redact.URLs(q.explain(err).Error())) // an endpoint or store URL may hold a password
	return exitError
}

// cli holds what the commands of one invocation share: the environment and the connection flags.
type cli struct {
	getenv func(string) string
	conn   connFlags
}

// usageError is a wrong command line: it exits 2 and points at the command's help.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// Command groups of `qleet --help`.
const (
	groupObjects      = "objects"
	groupControlPlane = "controlplane"
	groupSettings     = "settings"
)

func (q *cli) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "qleet",
		Short: "The QleetOS control plane and its CLI",
		Long: `qleet runs the QleetOS control plane (server, svc, controller, agent) and talks to its API.

The CLI verbs find the API through, in order: their --endpoint, --token and --ca-cert flags; the
QLEET_ENDPOINT, QLEET_TOKEN and QLEET_CA_CERT environment variables; the current context of the config
file (written by 'qleet login'; $QLEET_CONFIG, else $XDG_CONFIG_HOME/qleet/config.yaml, else
~/.config/qleet/config.yaml); and last http://127.0.0.1:8080 with the admin token in the data dir
(--data-dir, QLEET_DATA_DIR, default .qleet).

Kinds: ` + strings.Join(kindNames(), ", ") + `
(short: runtime, profile, definition, instance, gateway, domain, support, secret, database, bucket, account).`,
		Example: `  qleet server                                   # everything in one process, in ./.qleet
  qleet login https://qleet.example.com --token qlt_... --ca-cert ca.crt
  qleet get instances -o wide --watch
  qleet describe instance web
  qleet events instance web --watch
  source <(qleet completion bash)`,
		Version:       buildVersion().Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}
	root.SetVersionTemplate("qleet {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	root.AddGroup(
		&cobra.Group{ID: groupObjects, Title: "Objects:"},
		&cobra.Group{ID: groupControlPlane, Title: "Running the control plane:"},
		&cobra.Group{ID: groupSettings, Title: "Settings:"},
	)
	root.SetHelpCommandGroupID(groupSettings)
	root.SetCompletionCommandGroupID(groupSettings)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add(groupObjects, q.getCmd(), q.describeCmd(), q.deleteCmd(), q.eventsCmd(), q.graphCmd(), q.podsCmd(),
		q.imageCmd(), q.reconcileCmd(), q.planCmd())
	add(groupControlPlane,
		q.serverCmd("server", modeServer, "Run everything in one process: API, relay, controllers, embedded NATS, SQLite"),
		q.serverCmd("api", modeAPI, "Run the API server and the outbox relay (scale-out)"),
		q.serverCmd("controller", modeController, "Run the controllers against a remote API (scale-out)"),
		q.agentCmd(), q.upCmd(), q.downCmd())
	add(groupSettings, q.loginCmd(), q.configCmd(), q.tokenCmd(), q.versionCmd())
	return root
}

// unknownCommand is the usage error for a word that names no subcommand of cmd, with suggestions.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError{msg}
}

// groupRunE runs a command that only groups subcommands: it names what is missing or unknown.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		return usagef("missing command: one of %s", strings.Join(names, ", "))
	}
	return unknownCommand(cmd, args[0])
}

// exactArgs is cobra.ExactArgs with a usage error that shows the command's synopsis.
func exactArgs(n int) cobra.PositionalArgs {
	return rangeArgs(n, n)
}

// rangeArgs accepts between lo and hi positional arguments.
func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef("usage: %s", cmd.UseLine())
		}
		return nil
	}
}

// compatArgs keeps the command lines of the flag-package CLI that cobra replaced working: a long flag
// with one dash (-data-dir DIR, -listen=ADDR, -help) gets its second dash, and a shorthand written with
// two (--o json) loses one. Only names the resolved command knows are rewritten, and nothing after "--".
func compatArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	known := func(name string) bool {
		return name == "help" || cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
	}
	shorthand := func(name string) bool {
		return len(name) == 1 && (cmd.Flags().ShorthandLookup(name) != nil || cmd.InheritedFlags().ShorthandLookup(name) != nil)
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case strings.HasPrefix(name, "--") && shorthand(name[2:]):
			a = name[1:]
		case strings.HasPrefix(name, "-") && !strings.HasPrefix(name, "--") && len(name) > 2 && known(name[1:]):
			a = "-" + name
		default:
			out = append(out, a)
			continue
		}
		if hasValue {
			a += "=" + value
		}
		out = append(out, a)
	}
	return out
}
