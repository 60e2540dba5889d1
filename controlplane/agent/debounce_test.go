package agent

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// The first change of an instance is reported at once; a burst after it is coalesced into one more call
// at the end of the debounce window.
func TestChangesCallAtOnceThenCoalesce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []time.Time
	a, err := New(Config{
		Runtime: &client.KubernetesRuntime{Meta: client.Meta{Name: "rt"}}, Cluster: &kube.Cluster{},
		Debounce: 200 * time.Millisecond,
		OnChange: func(string) { mu.Lock(); calls = append(calls, time.Now()); mu.Unlock() },
	})
	require.NoError(t, err)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{kube.LabelInstanceID: "i1"}}}

	start := time.Now()
	a.changed(pod)
	require.Eventually(t, func() bool { return count() == 1 }, time.Second, time.Millisecond)
	require.Less(t, calls[0].Sub(start), 150*time.Millisecond, "the first change is not held for the window")
	for range 5 {
		a.changed(pod)
	}
	require.Eventually(t, func() bool { return count() == 2 }, 2*time.Second, time.Millisecond)
	time.Sleep(400 * time.Millisecond)
	require.Equal(t, 2, count(), "the burst became one trailing call")

	a.changed(&corev1.Pod{}) // no instance label: nothing to report
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 2, count())
}
