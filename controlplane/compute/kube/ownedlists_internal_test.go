package kube

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ownedObj is an object owned by id, tagged with the list that returned it.
func ownedObj(id string, list int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetName(fmt.Sprintf("%s-from-list-%d", id, list))
	u.SetLabels(map[string]string{LabelManagedBy: ManagedByValue, LabelInstanceID: id})
	return u
}

// gatedLister answers each list with one object per selected owner, after its gate opens.
type gatedLister struct {
	mu    sync.Mutex
	calls [][]string
	gates []chan struct{}
}

func (g *gatedLister) fn(ctx context.Context, ids []string) ([]*unstructured.Unstructured, error) {
	g.mu.Lock()
	n := len(g.calls)
	g.calls = append(g.calls, ids)
	gate := make(chan struct{})
	g.gates = append(g.gates, gate)
	g.mu.Unlock()
	<-gate
	var out []*unstructured.Unstructured
	for _, id := range ids {
		out = append(out, ownedObj(id, n))
	}
	out = append(out, ownedObj("someone-else", n)) // never handed to a caller that did not ask for it
	return out, nil
}

func (g *gatedLister) open(t *testing.T, i int) {
	t.Helper()
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.gates) > i }, 5*time.Second, time.Millisecond)
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gates[i])
}

func waiting(ol *ownedLists, res schema.GroupVersionResource) int {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	n := 0
	if kl := ol.kinds[res]; kl != nil {
		for _, b := range kl.waiting {
			n += len(b.ids)
		}
	}
	return n
}

// TestOwnedListsShareOnlyListsThatStartLater checks the sharing of owned-object lists: owners that ask
// while a list of the kind runs share the next list, each gets only its own objects, and no one is
// answered from a list that started before it asked.
func TestOwnedListsShareOnlyListsThatStartLater(t *testing.T) {
	ctx := context.Background()
	res := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	var ol ownedLists
	g := &gatedLister{}

	type answer struct {
		id   string
		objs []*unstructured.Unstructured
		err  error
	}
	answers := make(chan answer, 10)
	ask := func(ctx context.Context, id string) {
		go func() {
			objs, err := ol.list(ctx, res, id, g.fn)
			answers <- answer{id, objs, err}
		}()
	}

	ask(ctx, "a") // alone: listed at once
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.calls) == 1 }, 5*time.Second, time.Millisecond)
	cancelled, cancel := context.WithCancel(ctx)
	for _, id := range []string{"b", "c", "d"} {
		ask(ctx, id)
	}
	ask(cancelled, "e")
	require.Eventually(t, func() bool { return waiting(&ol, res) == 4 }, 5*time.Second, time.Millisecond, "b..e wait for the next list")
	cancel()
	got := <-answers
	require.Equal(t, "e", got.id)
	require.ErrorIs(t, got.err, context.Canceled, "a caller that goes away stops waiting")

	g.open(t, 0)
	got = <-answers
	require.Equal(t, "a", got.id)
	require.NoError(t, got.err)
	require.Len(t, got.objs, 1)
	require.Equal(t, "a-from-list-0", got.objs[0].GetName())

	g.open(t, 1)
	seen := map[string]string{}
	for range 3 {
		got := <-answers
		require.NoError(t, got.err)
		require.Len(t, got.objs, 1, "%s gets its own object only", got.id)
		seen[got.id] = got.objs[0].GetName()
	}
	require.Equal(t, map[string]string{"b": "b-from-list-1", "c": "c-from-list-1", "d": "d-from-list-1"}, seen,
		"those that asked while list 0 ran are answered by list 1, which started after they asked")
	g.mu.Lock()
	require.Equal(t, [][]string{{"a"}, {"b", "c", "d", "e"}}, g.calls, "two lists for five owners; ids sorted")
	g.mu.Unlock()
	require.Eventually(t, func() bool { ol.mu.Lock(); defer ol.mu.Unlock(); return len(ol.kinds) == 0 }, 5*time.Second, time.Millisecond, "nothing is kept once no one waits")
}

// TestOwnedListsBoundTheOwnersPerList checks that a shared list selects at most ownedBatchMax owners.
func TestOwnedListsBoundTheOwnersPerList(t *testing.T) {
	ctx := context.Background()
	res := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var ol ownedLists
	g := &gatedLister{}
	done := make(chan error, 2*ownedBatchMax+1)
	ask := func(id string) {
		go func() {
			objs, err := ol.list(ctx, res, id, g.fn)
			if err == nil && (len(objs) != 1 || objs[0].GetLabels()[LabelInstanceID] != id) {
				err = fmt.Errorf("%s got %d objects", id, len(objs))
			}
			done <- err
		}()
	}
	ask("first")
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.calls) == 1 }, 5*time.Second, time.Millisecond)
	for i := range 2 * ownedBatchMax {
		ask(fmt.Sprintf("o%03d", i))
	}
	require.Eventually(t, func() bool { return waiting(&ol, res) == 2*ownedBatchMax }, 5*time.Second, time.Millisecond)
	for i := range 3 {
		g.open(t, i)
	}
	for range 2*ownedBatchMax + 1 {
		require.NoError(t, <-done)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.calls, 3)
	require.Len(t, g.calls[1], ownedBatchMax)
	require.Len(t, g.calls[2], ownedBatchMax)
}

func TestOwnersSelector(t *testing.T) {
	require.Equal(t, ManagedSelector+","+LabelInstanceID+"=a", ownersSelector([]string{"a"}))
	require.Equal(t, ManagedSelector+","+LabelInstanceID+" in (a,b)", ownersSelector([]string{"a", "b"}))
}
