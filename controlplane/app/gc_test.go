package app_test

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
)

// TestTuneGC: without GOGC the control plane collects at DefaultGCPercent; a GOGC the user set (which Go
// applied at start) is left as it is.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	t.Setenv("GOGC", "")
	require.NoError(t, os.Unsetenv("GOGC"))
	gc, fromEnv := app.TuneGC()
	require.Equal(t, app.DefaultGCPercent, gc)
	require.False(t, fromEnv)
	require.Equal(t, app.DefaultGCPercent, app.GCPercent(), "the target is set, not only reported")

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150) // what the runtime did at start with that environment
	gc, fromEnv = app.TuneGC()
	require.Equal(t, 150, gc)
	require.True(t, fromEnv)
	require.Equal(t, 150, app.GCPercent())
}
