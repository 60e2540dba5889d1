package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRolloutPollScalesWithTheFleet(t *testing.T) {
	t.Parallel()
	require.Equal(t, 2*time.Second, rolloutPoll(0))
	require.Equal(t, 2*time.Second, rolloutPoll(499))
	require.Equal(t, 4*time.Second, rolloutPoll(500))
	require.Equal(t, 30*time.Second, rolloutPoll(10000), "capped")
}

func TestNotReadyPollSlowsWithTheRolloutsAge(t *testing.T) {
	t.Parallel()
	r := &InstanceReconciler{PollInterval: 2 * time.Second}
	require.Equal(t, 2*time.Second, r.pollAfter("unknown"), "nothing remembered: the base interval")

	r.remember("i", "h1", nil)
	require.Equal(t, 2*time.Second, r.pollAfter("i"), "a fresh rollout polls at the base interval")

	r.mu.Lock()
	e := r.recent["i"]
	e.since = time.Now().Add(-20 * time.Second)
	r.recent["i"] = e
	r.mu.Unlock()
	require.InDelta(t, float64(10*time.Second), float64(r.pollAfter("i")), float64(time.Second), "half the age")

	r.remember("i", "h1", nil)
	require.InDelta(t, float64(10*time.Second), float64(r.pollAfter("i")), float64(time.Second), "re-applying the same objects keeps the age")

	r.remember("i", "h2", nil)
	require.Equal(t, 2*time.Second, r.pollAfter("i"), "new desired objects start a new rollout")

	r.mu.Lock()
	e = r.recent["i"]
	e.since = time.Now().Add(-10 * time.Minute)
	r.recent["i"] = e
	r.mu.Unlock()
	require.Equal(t, 30*time.Second, r.pollAfter("i"), "capped")

	def := &InstanceReconciler{}
	require.Equal(t, 5*time.Second, def.pollAfter("unknown"), "a rollout's poll by default: after the agent's report of a quick rollout")
	require.Equal(t, 2*time.Second, def.pollInterval(), "a deletion's by default")
}
