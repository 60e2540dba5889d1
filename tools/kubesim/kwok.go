package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
)

// kwokMain runs kwok's controller the way its own main does, with the
// default node and pod stages (nodes Ready with leases, pods Running and
// Ready). The supervisor sets HOME to a directory under the data dir so that
// a user's ~/.kwok configuration never leaks in.
func kwokMain(args []string) error {
	ctx, stop := signalContext()
	defer stop()

	// kwok's flag helpers parse os.Args; give them exactly our arguments.
	os.Args = append([]string{"kwok"}, args...)
	global := pflag.NewFlagSet("global", pflag.ContinueOnError)
	global.ParseErrorsWhitelist.UnknownFlags = true
	global.Usage = func() {}
	ctx, _ = kwoklog.InitFlags(ctx, global)
	ctx, err := kwokconfig.InitFlags(ctx, global)
	if err != nil {
		return fmt.Errorf("kwok config: %w", err)
	}
	cmd := kwokcmd.NewCommand(ctx)
	// The Kubernetes packages linked into this binary already define a
	// non-bool global "version" flag; cobra's own would clash with it.
	cmd.Version = ""
	cmd.PersistentFlags().AddFlagSet(global)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}
