package chaos

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// TestChaos is the short version of `make chaos`: the whole topology, few writes, each part killed once.
func TestChaos(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := t.TempDir()
	for out, pkg := range map[string]string{"qleet": "../../controlplane/cmd/qleet", "nats-server": "github.com/nats-io/nats-server/v2"} {
		b, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, out), pkg).CombinedOutput()
		require.NoError(t, err, "go build %s: %s", pkg, b)
	}
	kubesimBin, err := kubesimtest.Binary(ctx)
	require.NoError(t, err)

	rep, err := Run(ctx, Config{
		Writes: 40, Writers: 2, Rate: 4, KillsPerPart: 1, Downtime: 500 * time.Millisecond,
		// Two of the five kills hit NATS, one of them a consumer's or the lock bucket's leader: the
		// election and the requests it swallows (retried after broker.Config.RequestTimeout, 4s) come
		// on top of the 15s that one kill per part needed. Measured 14.5s and 16.2s on a busy machine.
		ConvergeWithin: 20 * time.Second,
		QleetBinary:    filepath.Join(bin, "qleet"), NATSBinary: filepath.Join(bin, "nats-server"), KubesimBinary: kubesimBin,
		WorkDir: t.TempDir(), Logf: t.Logf,
	})
	require.NoError(t, err)
	t.Logf("%+v", rep)
	require.Empty(t, rep.Problems)
	require.Equal(t, 40, rep.Writes)
	require.Equal(t, map[string]int{"api": 1, "controller": 1, "nats": 1, "nats-leader": 1, "postgres": 1}, rep.Kills)
	require.Zero(t, rep.Lost)
	require.Zero(t, rep.Overlaps)
	require.Zero(t, rep.Orphans)
	require.Positive(t, rep.LockSpans)
	require.LessOrEqual(t, rep.ConvergenceSeconds, rep.ConvergeWithinSeconds, "the bound Run was given (see the comment above)")
}

func TestOverlapping(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Unix(1_700_000_000, 0).Add(time.Duration(s) * time.Second) }
	t.Run("holds of one object one after another do not overlap", func(t *testing.T) {
		require.Empty(t, overlapping([]span{
			{key: "k.1", holder: "a", start: at(0), end: at(2)},
			{key: "k.1", holder: "b", start: at(2), end: at(3)},
			{key: "k.2", holder: "a", start: at(1), end: at(5)},
		}))
	})
	t.Run("a hold that begins before another has ended overlaps it", func(t *testing.T) {
		got := overlapping([]span{
			{key: "k.1", holder: "a", start: at(0), end: at(10)},
			{key: "k.1", holder: "b", start: at(2), end: at(3)},
			{key: "k.1", holder: "c", start: at(5), end: at(6)},
		})
		require.Len(t, got, 2, "both later holds began inside the long first one")
		require.Contains(t, got[0], `k.1 held by "a"`)
	})
}
