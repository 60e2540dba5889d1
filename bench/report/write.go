package report

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Files are the paths one run wrote.
type Files struct {
	JSON     string
	Markdown string
	Charts   []string
}

// Write writes <dir>/<timestamp>.json, <dir>/latest.md and the charts (<dir>/<timestamp>/*.png, where the
// profiles also are). Chart failures are noted in the Markdown, not fatal.
func Write(dir string, res *Results) (Files, error) {
	stamp := res.StartedAt.UTC().Format("20060102T150405Z")
	var f Files
	if err := os.MkdirAll(filepath.Join(dir, stamp), 0o755); err != nil {
		return f, err
	}
	charts, chartErr := Charts(filepath.Join(dir, stamp), res)
	for _, c := range charts {
		f.Charts = append(f.Charts, filepath.Join(dir, stamp, c))
	}
	if chartErr != nil {
		res.Notes = append(res.Notes, "charts: "+chartErr.Error())
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return f, err
	}
	f.JSON = filepath.Join(dir, stamp+".json")
	if err := os.WriteFile(f.JSON, append(data, '\n'), 0o644); err != nil {
		return f, err
	}
	md := Markdown(res, stamp, charts)
	f.Markdown = filepath.Join(dir, "latest.md")
	if err := os.WriteFile(f.Markdown, []byte(md), 0o644); err != nil {
		return f, err
	}
	return f, nil
}

// SummarizeProfiles fills in the Top of each CPU profile with the head of `go tool pprof -top`. Profile
// files are relative to dir.
func SummarizeProfiles(ctx context.Context, dir string, res *Results) {
	for i, p := range res.Profiles {
		args := []string{"tool", "pprof", "-top", "-nodecount=25"}
		if p.Kind == "heap" {
			args = append(args, "-sample_index=inuse_space")
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		out, err := exec.CommandContext(cctx, "go", append(args, filepath.Join(dir, p.File))...).Output()
		cancel()
		if err != nil {
			res.Profiles[i].Top = fmt.Sprintf("(go tool pprof failed: %v)", err)
			continue
		}
		res.Profiles[i].Top = strings.TrimSpace(string(out))
	}
}
