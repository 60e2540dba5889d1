package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/spf13/pflag"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
)

// kwokFlagsMu serialises the swap of os.Args around kwok's flag helpers.
var kwokFlagsMu sync.Mutex

// runKwok runs kwok's controller inside the supervisor the way its own main
// does, with the default node and pod stages (nodes Ready with leases, pods
// Running and Ready), logging to w. workDir replaces ~/.kwok, so that a
// user's kwok configuration never leaks in.
func runKwok(workDir string, args []string) func(ctx context.Context, w io.Writer) error {
	return func(ctx context.Context, w io.Writer) error {
		ctx = kwoklog.NewContext(ctx, kwoklog.NewLogger(w, kwoklog.LevelInfo))

		kwokFlagsMu.Lock()
		// kwok reads its configuration from WorkDir/kwok.yaml (a package
		// variable set from $HOME at start-up) and parses os.Args for
		// --config; give it the data dir and exactly our arguments. Nothing
		// else in the supervisor reads either.
		kwokconfig.WorkDir = workDir
		saved := os.Args
		os.Args = append([]string{"kwok"}, args...)
		global := pflag.NewFlagSet("global", pflag.ContinueOnError)
		global.ParseErrorsWhitelist.UnknownFlags = true
		global.Usage = func() {}
		ctx, err := kwokconfig.InitFlags(ctx, global)
		os.Args = saved
		kwokFlagsMu.Unlock()
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}

		cmd := kwokcmd.NewCommand(ctx)
		// The Kubernetes packages linked into this binary already define a
		// non-bool global "version" flag; cobra's own would clash with it.
		cmd.Version = ""
		cmd.PersistentFlags().AddFlagSet(global)
		cmd.SetArgs(args)
		cmd.SetOut(w)
		cmd.SetErr(w)
		return cmd.ExecuteContext(ctx)
	}
}
