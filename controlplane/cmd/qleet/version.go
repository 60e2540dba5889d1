package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at build time, e.g. go build -ldflags "-X main.version=v0.4.0 -X main.commit=$(git rev-parse HEAD)";
// without them, the module version and VCS revision that Go stamps into the binary are used.
var (
	version = ""
	commit  = ""
)

// versionInfo is what `qleet version` reports.
type versionInfo struct {
	// Version is the release, or the module's pseudo-version for a build from a checkout.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, with "+dirty" for uncommitted changes.
	Commit string `json:"commit,omitempty"`
	// CommitTime is the commit's time, as Go stamped it.
	CommitTime string `json:"commit_time,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && commit == "" && v.Commit != "" {
			v.Commit += "+dirty"
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

func (q *cli) versionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of qleet, its commit and the Go that built it",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			v := buildVersion()
			if structured(output) {
				return printStructured(cmd.OutOrStdout(), output, v)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "qleet %s\n", v.Version)
			if v.Commit != "" {
				fmt.Fprintf(w, "  commit:   %s", v.Commit)
				if v.CommitTime != "" {
					fmt.Fprintf(w, " (%s)", v.CommitTime)
				}
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "  go:       %s\n  platform: %s\n", v.GoVersion, v.Platform)
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
