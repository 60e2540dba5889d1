package agent

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// The first change of an instance is reported at once; a burst after it is coalesced into one more call
// at the end of the debounce window.
func TestChangesCallAtOnceThenCoalesce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []time.Time
	a, err := New(Config{
		Runtime: &api.KubernetesRuntime{Meta: api.Meta{Name: "rt"}}, Cluster: &kube.Cluster{},
		Debounce: 200 * time.Millisecond,
		OnChange: func(string) { mu.Lock(); calls = append(calls, time.Now()); mu.Unlock() },
	})
	require.NoError(t, err)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{kube.LabelInstanceID: "i1"}}}

	start := time.Now()
	a.changed(pod, false)
	await.True(t, time.Second, func() bool { return count() == 1 }, "the first change reported")
	require.Less(t, calls[0].Sub(start), 150*time.Millisecond, "the first change is not held for the window")
	for range 5 {
		a.changed(pod, false)
	}
	await.True(t, 2*time.Second, func() bool { return count() == 2 }, "the burst's trailing call")
	time.Sleep(400 * time.Millisecond) // no signal: a window, twice the debounce, in which no third call must come
	require.Equal(t, 2, count(), "the burst became one trailing call")

	a.changed(&corev1.Pod{}, false)    // no instance label: nothing to report
	time.Sleep(300 * time.Millisecond) // no signal: a window in which the unlabelled change must not call
	require.Equal(t, 2, count())
}

// A workload whose rollout completes is reported at once, even within the window opened by the changes
// before it (its pods becoming ready): that is the change an instance's wait for readiness ends on.
func TestACompletedRolloutCallsAtOnceWithinTheWindow(t *testing.T) {
	t.Parallel()
	calls := make(chan time.Time, 10)
	a, err := New(Config{
		Runtime: &api.KubernetesRuntime{Meta: api.Meta{Name: "rt"}}, Cluster: &kube.Cluster{},
		Debounce: time.Hour,
		OnChange: func(string) { calls <- time.Now() },
	})
	require.NoError(t, err)
	h := a.healthHandler()
	labels := map[string]string{kube.LabelInstanceID: "i1"}
	three := int32(3)
	dep := func(available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: labels, Generation: 1}, Spec: appsv1.DeploymentSpec{Replicas: &three},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: available, AvailableReplicas: available}}
	}

	h.OnUpdate(dep(0), dep(1)) // opens the window: called at once
	<-calls
	h.OnUpdate(dep(1), dep(2)) // within the window: held for its end (an hour away)
	select {
	case <-calls:
		t.Fatal("a change within the window that completes nothing was not held")
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	h.OnUpdate(dep(2), dep(3)) // the rollout completes: at once
	select {
	case at := <-calls:
		require.Less(t, at.Sub(start), 100*time.Millisecond)
	case <-time.After(5 * time.Second):
		t.Fatal("a completed rollout within the window was not reported at once")
	}
	require.False(t, rolledOut(dep(2)))
	require.True(t, rolledOut(dep(3)))
}
