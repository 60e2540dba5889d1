package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// report is a rollout waiting on its Deployment for the given reason.
func report(msg string) kube.HealthReport {
	return kube.HealthReport{Replicas: 1, Objects: []api.AppliedObject{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web", Message: msg},
	}}
}

// age moves the rollout's last progress back by d, as if that long had passed without any.
func (r *InstanceReconciler) age(id string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.progress[id]
	p.at = p.at.Add(-d)
	r.progress[id] = p
}

func TestStallDeadlines(t *testing.T) {
	t.Parallel()
	const unschedulable = "0 of 1 replicas updated, 0 available; pod web-1: Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."

	t.Run("an unschedulable pod stalls the rollout after the short grace, long before the create timeout", func(t *testing.T) {
		r := &InstanceReconciler{}
		st, due := r.stall("a", "h", report(unschedulable))
		require.Nil(t, st)
		require.Equal(t, DefaultUnschedulableGrace, due, "the poll comes back when the grace ends")
		r.age("a", DefaultUnschedulableGrace-time.Second)
		st, due = r.stall("a", "h", report(unschedulable))
		require.Nil(t, st)
		require.LessOrEqual(t, due, time.Second)
		r.age("a", time.Second)
		st, _ = r.stall("a", "h", report(unschedulable))
		require.NotNil(t, st)
		require.Equal(t, "Unschedulable", st.Reason)
		require.Contains(t, st.Message, "Insufficient cpu")
	})

	t.Run("any other lack of progress waits for the progress deadline, below the create timeout", func(t *testing.T) {
		require.Less(t, DefaultProgressDeadline, 10*time.Minute, "the provider's default create timeout")
		r := &InstanceReconciler{}
		msg := "0 of 1 replicas available"
		st, due := r.stall("b", "h", report(msg))
		require.Nil(t, st)
		require.Equal(t, DefaultProgressDeadline, due)
		r.age("b", time.Minute)
		st, _ = r.stall("b", "h", report(msg))
		require.Nil(t, st, "one minute without progress is not a stall")
		r.age("b", DefaultProgressDeadline)
		st, _ = r.stall("b", "h", report(msg))
		require.NotNil(t, st)
		require.Equal(t, "NoProgress", st.Reason)
	})

	t.Run("progress restarts the clock", func(t *testing.T) {
		r := &InstanceReconciler{}
		_, _ = r.stall("c", "h", report(unschedulable))
		r.age("c", time.Hour)
		moved := report(unschedulable)
		moved.ReadyReplicas = 1
		st, due := r.stall("c", "h", moved)
		require.Nil(t, st)
		require.Equal(t, DefaultUnschedulableGrace, due)
	})

	t.Run("a configured progress deadline shorter than the grace wins", func(t *testing.T) {
		r := &InstanceReconciler{ProgressDeadline: 2 * time.Second}
		_, due := r.stall("d", "h", report(unschedulable))
		require.Equal(t, 2*time.Second, due)
	})
}
