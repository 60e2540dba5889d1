package agent

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// A rollout's progress (pods scheduled, started, ready one by one) is not reported change by change: a
// burst of it becomes one call at the end of the debounce window, and each call costs the instance a
// reconcile.
func TestProgressIsCoalescedIntoOneCall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []time.Time
	a, err := New(Config{
		Runtime: &api.KubernetesRuntime{Meta: api.Meta{Name: "rt"}}, Cluster: &kube.Cluster{},
		Debounce: 200 * time.Millisecond,
		OnChange: func(string, string) { mu.Lock(); calls = append(calls, time.Now()); mu.Unlock() },
	})
	require.NoError(t, err)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	h := a.healthHandler(informerSet{})
	labels := map[string]string{kube.LabelInstanceID: "i1"}
	pod := func(phase corev1.PodPhase, ready corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: ready}}}}
	}

	start := time.Now()
	h.OnUpdate(pod(corev1.PodPending, corev1.ConditionFalse), pod(corev1.PodRunning, corev1.ConditionFalse))
	h.OnUpdate(pod(corev1.PodRunning, corev1.ConditionFalse), pod(corev1.PodRunning, corev1.ConditionTrue))
	h.OnUpdate(pod(corev1.PodRunning, corev1.ConditionFalse), pod(corev1.PodRunning, corev1.ConditionTrue))
	await.True(t, 2*time.Second, func() bool { return count() == 1 }, "the burst's one call")
	require.GreaterOrEqual(t, calls[0].Sub(start), 200*time.Millisecond, "progress waits for the window's end")
	time.Sleep(400 * time.Millisecond) // no signal: a window, twice the debounce, in which no second call must come
	require.Equal(t, 1, count(), "the burst became one call")

	h.OnUpdate(&corev1.Pod{}, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}) // no instance label
	time.Sleep(300 * time.Millisecond)                                                        // no signal: a window in which the unlabelled change must not call
	require.Equal(t, 1, count())
}

// The changes that decide something for the instance are reported at once, however long the window:
// a pod problem, a spec change to put back, a rollout that stops being complete, a deleted object.
func TestDecisiveChangesCallAtOnce(t *testing.T) {
	t.Parallel()
	h, calls := hourWindow(t)
	labels := testLabels
	dep := threeReplicas
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}}}
	}
	unschedulable := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	atOnce := func(what string, change func()) {
		t.Helper()
		start := time.Now()
		change()
		select {
		case at := <-calls:
			require.Less(t, at.Sub(start), 100*time.Millisecond, what)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s was not reported at once", what)
		}
	}
	held := func(what string, change func()) {
		t.Helper()
		change()
		select {
		case <-calls:
			t.Fatalf("%s was reported at once; it is progress", what)
		case <-time.After(100 * time.Millisecond): // no signal: a call would come within this
		}
	}

	held("a container being created", func() {
		h.OnUpdate(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}}, waiting("ContainerCreating"))
	})
	atOnce("an image that cannot be pulled", func() { h.OnUpdate(waiting("ContainerCreating"), waiting("ErrImagePull")) })
	held("the same problem again", func() { h.OnUpdate(waiting("ErrImagePull"), waiting("ErrImagePull")) })
	atOnce("a new problem", func() { h.OnUpdate(waiting("ErrImagePull"), waiting("ImagePullBackOff")) })
	atOnce("an unschedulable pod", func() { h.OnUpdate(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}}, unschedulable) })
	atOnce("a spec edited by hand", func() { h.OnUpdate(dep(1, 3), dep(2, 3)) })
	atOnce("a rollout that stops being complete", func() { h.OnUpdate(dep(1, 3), dep(1, 2)) })
	held("more progress", func() { h.OnUpdate(dep(1, 1), dep(1, 2)) })
	atOnce("a deleted workload", func() { h.OnDelete(dep(1, 3)) })
	h.OnDelete(waiting("ErrImagePull")) // a pod's deletion is its workload's business
	select {
	case <-calls:
		t.Fatal("a deleted pod was reported")
	case <-time.After(100 * time.Millisecond): // no signal: a call would come within this
	}
}

// A workload whose rollout completes is reported at once, even within the window opened by the changes
// before it (its pods becoming ready): that is the change an instance's wait for readiness ends on.
func TestACompletedRolloutCallsAtOnceWithinTheWindow(t *testing.T) {
	t.Parallel()
	h, calls := hourWindow(t)
	dep := func(available int32) *appsv1.Deployment { return threeReplicas(1, available) }

	h.OnUpdate(dep(0), dep(1)) // progress: held for the window's end (an hour away)
	h.OnUpdate(dep(1), dep(2)) // within the window: held too
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

// testLabels label the objects of the instance the agent tests watch.
var testLabels = map[string]string{kube.LabelInstanceID: "i1"}

// hourWindow returns the health handler of an agent whose progress window is an hour, and the times
// of its OnChange calls.
func hourWindow(t *testing.T) (cache.ResourceEventHandler, chan time.Time) {
	t.Helper()
	calls := make(chan time.Time, 10)
	a, err := New(Config{
		Runtime: &api.KubernetesRuntime{Meta: api.Meta{Name: "rt"}}, Cluster: &kube.Cluster{},
		Debounce: time.Hour,
		OnChange: func(string, string) { calls <- time.Now() },
	})
	require.NoError(t, err)
	return a.healthHandler(informerSet{}), calls
}

// threeReplicas is the instance's 3-replica Deployment at generation gen, observed at generation 1, with
// available replicas ready and available.
func threeReplicas(gen int64, available int32) *appsv1.Deployment {
	three := int32(3)
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: testLabels, Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &three},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: available, AvailableReplicas: available}}
}
