package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Output formats of -o.
const (
	outTable = "table"
	outWide  = "wide"
	outJSON  = "json"
	outYAML  = "yaml"
)

var outputFormats = []string{outTable, outWide, outJSON, outYAML}

// addOutputFlag registers -o/--output with its completion.
func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", outTable, "output format: "+strings.Join(outputFormats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return outputFormats, cobra.ShellCompDirectiveNoFileComp
	})
}

// checkOutput refuses an unknown -o.
func checkOutput(output string) error {
	for _, f := range outputFormats {
		if output == f {
			return nil
		}
	}
	return usagef("-o %q: must be one of %s", output, strings.Join(outputFormats, ", "))
}

// structured reports whether the format is JSON or YAML rather than a table.
func structured(output string) bool { return output == outJSON || output == outYAML }

// printStructured writes v as indented JSON or as YAML (the JSON field names).
func printStructured(w io.Writer, output string, v any) error {
	if output == outYAML {
		data, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode YAML: %w", err)
		}
		_, err = w.Write(data)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// age is how long ago t was, in kubectl's short style.
func age(t time.Time) string { return ageAt(time.Now(), t) }

// ageAt is how long before now t was, in kubectl's short style; "-" for a zero time.
func ageAt(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// truncate shortens s to n characters, unless wide output shows everything.
func truncate(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// width is the message width of a table: truncated, or whole in wide output.
func width(output string, n int) int {
	if output == outWide {
		return 0
	}
	return n
}
