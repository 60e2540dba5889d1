// Package storetest is the conformance suite for store.Store. Every backend runs the same specification:
//
//	func TestSQLite(t *testing.T) { storetest.Run(t, openSQLite) }
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// Open returns a new, empty store for one test; it closes the store in t.Cleanup.
type Open func(t *testing.T) store.Store

// Run runs the conformance suite. Each behaviour runs as a parallel subtest on its own empty store.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"create then get by id and by name", testCreateGet},
		{"ids are UUIDv7 in creation order", testIDOrder},
		{"names are unique per kind", testNameUnique},
		{"concurrent creates of one name: exactly one wins", testConcurrentSameName},
		{"concurrent creates all succeed", testConcurrentCreates},
		{"deletion and a new reference never both win", testDeleteVersusReference},
		{"concurrent writes with one If-Match: exactly one wins", testConcurrentIfMatch},
		{"update spec bumps generation only on a real change", testGenerationRules},
		{"update status never bumps generation", testStatusGeneration},
		{"update status checks under the row's lock, and a refused check writes nothing", testStatusCheck},
		{"stale If-Match is refused and changes nothing", testIfMatch},
		{"list filters by labels and pages without gaps or duplicates", testListPaging},
		{"list applies the default page size", testListDefaultLimit},
		{"list filters by reference", testListByReference},
		{"references must exist with their kind and not be deleting", testRefsMustExist},
		{"referenced objects cannot be deleted", testDeletionProtection},
		{"request deletion sets the time once", testRequestDeletionOnce},
		{"finalize removes the object and enqueues what it referenced", testFinalize},
		{"finalize needs a deletion request", testFinalizeNotDeleting},
		{"update spec replaces references, and enqueues the objects it no longer references", testUpdateReplacesRefs},
		{"status write enqueues dependents, not the object", testStatusEnqueuesDependents},
		{"status write enqueues the owners that wait, as it does dependents", testStatusEnqueuesOwners},
		{"list pending and owned objects, from their indexes", testListPendingAndOwned},
		{"status references protect and notify apart from the spec's", testStatusRefs},
		{"outbox is ordered and deletable", testOutbox},
		{"outbox stats count and age", testOutboxStats},
		{"events keep the newest 200", testEventsRetention},
		{"events need an existing object", testEventsMissingObject},
		{"an event with no generation gets the object's", testEventsDefaultGeneration},
		{"a repeated event is counted on one row", testEventsRepeat},
		{"tokens", testTokens},
		{"failed create writes nothing", testFailedCreateAtomic},
		{"failed update writes nothing", testFailedUpdateAtomic},
		{"count objects by phase, fields and condition, with the oldest unreconciled", testCountObjects},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

const (
	kindRuntime  = "kubernetes_runtimes"
	kindInstance = "workload_instances"
	kindGateway  = "gateways"
)

func ctx(t *testing.T) context.Context { return t.Context() }

func create(t *testing.T, s store.Store, kind, name string, labels map[string]string, refs ...store.Ref) *store.Object {
	t.Helper()
	obj, err := s.Create(ctx(t), &store.CreateParams{
		Kind:   kind,
		Name:   name,
		Labels: labels,
		Spec:   json.RawMessage(fmt.Sprintf(`{"name":%q,"n":1}`, name)),
		Refs:   refs,
	})
	require.NoError(t, err)
	return obj
}

func refTo(o *store.Object) store.Ref { return store.Ref{Kind: o.Kind, ID: o.ID} }

// drain deletes every pending outbox entry and returns them.
func drain(t *testing.T, s store.Store) []*store.OutboxEntry {
	t.Helper()
	entries, err := s.PendingOutbox(ctx(t), 1000)
	require.NoError(t, err)
	ids := make([]int64, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	require.NoError(t, s.DeleteOutbox(ctx(t), ids))
	return entries
}

// outboxKeys returns "kind/id" for each pending entry, in order.
func outboxKeys(t *testing.T, s store.Store) []string {
	t.Helper()
	entries, err := s.PendingOutbox(ctx(t), 1000)
	require.NoError(t, err)
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = e.Kind + "/" + e.ObjectID
	}
	return keys
}

func key(o *store.Object) string { return o.Kind + "/" + o.ID }

func testCreateGet(t *testing.T, s store.Store) {
	before := time.Now().Add(-time.Second)
	obj, err := s.Create(ctx(t), &store.CreateParams{
		Kind:   kindRuntime,
		Name:   "us-east",
		Labels: map[string]string{"env": "prod", "region": "us-east-1"},
		Spec:   json.RawMessage(`{ "provider": "local",  "nodes": {"max": 3, "min": 1} }`),
		Status: json.RawMessage(`{"phase":"Pending"}`),
	})
	require.NoError(t, err)
	require.Equal(t, kindRuntime, obj.Kind)
	require.Equal(t, "us-east", obj.Name)
	require.EqualValues(t, 1, obj.Generation)
	require.EqualValues(t, 1, obj.ResourceVersion)
	require.Equal(t, map[string]string{"env": "prod", "region": "us-east-1"}, obj.Labels)
	require.JSONEq(t, `{"provider":"local","nodes":{"min":1,"max":3}}`, string(obj.Spec))
	require.JSONEq(t, `{"phase":"Pending"}`, string(obj.Status))
	require.True(t, obj.CreatedAt.After(before), "created_at %v", obj.CreatedAt)
	require.Equal(t, obj.CreatedAt, obj.UpdatedAt)
	require.Nil(t, obj.DeletionRequestedAt)

	got, err := s.Get(ctx(t), kindRuntime, obj.ID)
	require.NoError(t, err)
	requireSameObject(t, obj, got)

	byName, err := s.GetByName(ctx(t), kindRuntime, "us-east")
	require.NoError(t, err)
	requireSameObject(t, obj, byName)

	_, err = s.Get(ctx(t), kindGateway, obj.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "same id, other kind")
	_, err = s.Get(ctx(t), kindRuntime, uuid.NewString())
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetByName(ctx(t), kindRuntime, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)

	bare := create(t, s, kindGateway, "no-labels", nil)
	got, err = s.Get(ctx(t), kindGateway, bare.ID)
	require.NoError(t, err)
	require.NotNil(t, got.Labels)
	require.Empty(t, got.Labels)
	require.JSONEq(t, `{}`, string(got.Status), "an absent status reads as {}")
}

func requireSameObject(t *testing.T, want, got *store.Object) {
	t.Helper()
	require.Equal(t, want.ID, got.ID)
	require.Equal(t, want.Kind, got.Kind)
	require.Equal(t, want.Name, got.Name)
	require.Equal(t, want.Labels, got.Labels)
	require.Equal(t, want.Generation, got.Generation)
	require.Equal(t, want.ResourceVersion, got.ResourceVersion)
	require.JSONEq(t, string(want.Spec), string(got.Spec))
	require.JSONEq(t, string(want.Status), string(got.Status))
	require.True(t, want.CreatedAt.Equal(got.CreatedAt), "created_at %v != %v", want.CreatedAt, got.CreatedAt)
	require.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "updated_at %v != %v", want.UpdatedAt, got.UpdatedAt)
	if want.DeletionRequestedAt == nil {
		require.Nil(t, got.DeletionRequestedAt)
	} else {
		require.NotNil(t, got.DeletionRequestedAt)
		require.True(t, want.DeletionRequestedAt.Equal(*got.DeletionRequestedAt))
	}
}

func testIDOrder(t *testing.T, s store.Store) {
	var want []string
	for i := range 5 {
		obj := create(t, s, kindGateway, fmt.Sprintf("g%d", i), nil)
		id, err := uuid.Parse(obj.ID)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(7), id.Version())
		want = append(want, obj.ID)
	}
	require.True(t, sort.StringsAreSorted(want), "ids sort in creation order: %v", want)
	res, err := s.List(ctx(t), &store.ListParams{Kind: kindGateway})
	require.NoError(t, err)
	var got []string
	for _, o := range res.Objects {
		got = append(got, o.ID)
	}
	require.Equal(t, want, got)
	require.Empty(t, res.Next)
}

func testNameUnique(t *testing.T, s store.Store) {
	first := create(t, s, kindRuntime, "dup", nil)
	drain(t, s)
	_, err := s.Create(ctx(t), &store.CreateParams{Kind: kindRuntime, Name: "dup", Spec: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrNameTaken)
	require.Empty(t, outboxKeys(t, s), "a refused create enqueues nothing")

	create(t, s, kindGateway, "dup", nil) // another kind may use the name

	// Once the first is gone the name is free again.
	_, err = s.RequestDeletion(ctx(t), kindRuntime, first.ID, store.DeletionOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Finalize(ctx(t), kindRuntime, first.ID))
	create(t, s, kindRuntime, "dup", nil)
}

func testConcurrentSameName(t *testing.T, s store.Store) {
	const n = 8
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = s.Create(ctx(t), &store.CreateParams{
				Kind: kindInstance, Name: "contested", Spec: json.RawMessage(fmt.Sprintf(`{"by":%d}`, i)),
			})
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		require.ErrorIs(t, err, store.ErrNameTaken)
	}
	require.Equal(t, 1, wins)
	require.Len(t, outboxKeys(t, s), 1, "only the winner is enqueued")
}

func testConcurrentCreates(t *testing.T, s store.Store) {
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := s.Create(ctx(t), &store.CreateParams{
					Kind: kindInstance, Name: fmt.Sprintf("w%d-%d", w, i), Spec: json.RawMessage(`{}`),
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	res, err := s.List(ctx(t), &store.ListParams{Kind: kindInstance, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, res.Objects, workers*each)
}

func testGenerationRules(t *testing.T, s store.Store) {
	obj, err := s.Create(ctx(t), &store.CreateParams{
		Kind: kindInstance, Name: "web", Labels: map[string]string{"a": "1"},
		Spec: json.RawMessage(`{"image":"nginx","replicas":2}`),
	})
	require.NoError(t, err)

	// Same document, other spelling: labels change, generation does not.
	upd, err := s.UpdateSpec(ctx(t), &store.UpdateSpecParams{
		Kind: kindInstance, ID: obj.ID, Labels: map[string]string{"b": "2"},
		Spec: json.RawMessage(" {\"replicas\": 2,\n \"image\": \"nginx\"} "),
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, upd.Generation)
	require.EqualValues(t, 2, upd.ResourceVersion)
	require.Equal(t, map[string]string{"b": "2"}, upd.Labels)
	require.False(t, upd.UpdatedAt.Before(obj.UpdatedAt))

	upd, err = s.UpdateSpec(ctx(t), &store.UpdateSpecParams{
		Kind: kindInstance, ID: obj.ID, Spec: json.RawMessage(`{"image":"nginx","replicas":3}`),
	})
	require.NoError(t, err)
	require.EqualValues(t, 2, upd.Generation)
	require.EqualValues(t, 3, upd.ResourceVersion)
	require.Empty(t, upd.Labels)

	got, err := s.Get(ctx(t), kindInstance, obj.ID)
	require.NoError(t, err)
	requireSameObject(t, upd, got)

	_, err = s.UpdateSpec(ctx(t), &store.UpdateSpecParams{Kind: kindInstance, ID: uuid.NewString(), Spec: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testStatusGeneration(t *testing.T, s store.Store) {
	obj := create(t, s, kindRuntime, "r", map[string]string{"env": "dev"})
	upd, err := s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindRuntime, ID: obj.ID, Status: json.RawMessage(`{"phase":"Ready","observed_generation":1}`),
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, upd.Generation)
	require.EqualValues(t, 2, upd.ResourceVersion)
	require.Equal(t, obj.Labels, upd.Labels)
	require.JSONEq(t, string(obj.Spec), string(upd.Spec))
	require.JSONEq(t, `{"phase":"Ready","observed_generation":1}`, string(upd.Status))

	got, err := s.Get(ctx(t), kindRuntime, obj.ID)
	require.NoError(t, err)
	requireSameObject(t, upd, got)

	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindRuntime, ID: uuid.NewString(), Status: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testStatusCheck(t *testing.T, s store.Store) {
	obj := create(t, s, kindInstance, "checked", nil)
	upd, err := s.UpdateSpec(ctx(t), &store.UpdateSpecParams{Kind: kindInstance, ID: obj.ID, Spec: json.RawMessage(`{"v":2}`)})
	require.NoError(t, err)
	require.EqualValues(t, 2, upd.Generation)
	drain(t, s)

	refused := errors.New("observed_generation is ahead")
	var saw []int64
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindInstance, ID: obj.ID, Status: json.RawMessage(`{"phase":"Ready","observed_generation":3}`),
		Check: func(generation int64) error { saw = append(saw, generation); return refused },
	})
	require.ErrorIs(t, err, refused)
	require.NotEmpty(t, saw)
	require.EqualValues(t, 2, saw[len(saw)-1], "the check sees the locked row's generation")
	got, err := s.Get(ctx(t), kindInstance, obj.ID)
	require.NoError(t, err)
	requireSameObject(t, upd, got)
	require.Empty(t, outboxKeys(t, s))

	// The check comes before If-Match, so that a status that is wrong in itself says so first.
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindInstance, ID: obj.ID, IfMatch: 1, Status: json.RawMessage(`{}`),
		Check: func(int64) error { return refused },
	})
	require.ErrorIs(t, err, refused)

	st, err := s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindInstance, ID: obj.ID, Status: json.RawMessage(`{"phase":"Ready","observed_generation":2}`),
		Check: func(generation int64) error { return nil },
	})
	require.NoError(t, err)
	require.EqualValues(t, upd.ResourceVersion+1, st.ResourceVersion)
}

func testIfMatch(t *testing.T, s store.Store) {
	obj := create(t, s, kindInstance, "web", map[string]string{"a": "1"})
	upd, err := s.UpdateSpec(ctx(t), &store.UpdateSpecParams{
		Kind: kindInstance, ID: obj.ID, IfMatch: 1, Labels: obj.Labels, Spec: json.RawMessage(`{"v":2}`),
	})
	require.NoError(t, err)
	require.EqualValues(t, 2, upd.ResourceVersion)
	drain(t, s)

	_, err = s.UpdateSpec(ctx(t), &store.UpdateSpecParams{
		Kind: kindInstance, ID: obj.ID, IfMatch: 1, Spec: json.RawMessage(`{"v":3}`),
	})
	require.ErrorIs(t, err, store.ErrStale)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindInstance, ID: obj.ID, IfMatch: 1, Status: json.RawMessage(`{"phase":"Ready"}`),
	})
	require.ErrorIs(t, err, store.ErrStale)

	got, err := s.Get(ctx(t), kindInstance, obj.ID)
	require.NoError(t, err)
	requireSameObject(t, upd, got)
	require.Empty(t, outboxKeys(t, s))

	st, err := s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindInstance, ID: obj.ID, IfMatch: 2, Status: json.RawMessage(`{"phase":"Ready"}`),
	})
	require.NoError(t, err)
	require.EqualValues(t, 3, st.ResourceVersion)
}

func testListPaging(t *testing.T, s store.Store) {
	want := map[string]bool{}
	for i := range 23 {
		labels := map[string]string{"env": "dev", "idx": fmt.Sprint(i)}
		if i%3 != 0 {
			labels["env"] = "prod"
			labels["tier"] = "web"
		}
		obj := create(t, s, kindInstance, fmt.Sprintf("app-%02d", i), labels)
		if labels["env"] == "prod" {
			want[obj.ID] = true
		}
	}
	create(t, s, kindGateway, "other-kind", map[string]string{"env": "prod", "tier": "web"})
	require.Len(t, want, 15)

	for _, limit := range []int{1, 4, 5, 15, 16, 100} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			seen := map[string]bool{}
			var last string
			after := ""
			pages := 0
			for {
				res, err := s.List(ctx(t), &store.ListParams{
					Kind: kindInstance, Labels: map[string]string{"env": "prod", "tier": "web"}, Limit: limit, After: after,
				})
				require.NoError(t, err)
				pages++
				require.LessOrEqual(t, len(res.Objects), limit)
				for _, o := range res.Objects {
					require.False(t, seen[o.ID], "duplicate %s", o.ID)
					require.Greater(t, o.ID, last, "ordered by id")
					require.Equal(t, "prod", o.Labels["env"])
					seen[o.ID] = true
					last = o.ID
				}
				if res.Next == "" {
					break
				}
				require.Len(t, res.Objects, limit, "only a full page has a next page")
				require.Equal(t, last, res.Next)
				after = res.Next
			}
			require.Equal(t, want, seen)
			require.Equal(t, (15+limit-1)/limit, pages, "no trailing empty page")
		})
	}

	res, err := s.List(ctx(t), &store.ListParams{Kind: kindInstance, Labels: map[string]string{"env": "staging"}})
	require.NoError(t, err)
	require.Empty(t, res.Objects)
	require.Empty(t, res.Next)

	res, err = s.List(ctx(t), &store.ListParams{Kind: kindInstance, Labels: map[string]string{"env": "dev"}})
	require.NoError(t, err)
	require.Len(t, res.Objects, 8)
}

func testListDefaultLimit(t *testing.T, s store.Store) {
	for i := range store.DefaultListLimit + 1 {
		create(t, s, kindGateway, fmt.Sprintf("g%03d", i), nil)
	}
	res, err := s.List(ctx(t), &store.ListParams{Kind: kindGateway})
	require.NoError(t, err)
	require.Len(t, res.Objects, store.DefaultListLimit)
	require.NotEmpty(t, res.Next)
	res, err = s.List(ctx(t), &store.ListParams{Kind: kindGateway, After: res.Next, Limit: 1_000_000})
	require.NoError(t, err)
	require.Len(t, res.Objects, 1)
	require.Empty(t, res.Next)
}

func testRefsMustExist(t *testing.T, s store.Store) {
	rt := create(t, s, kindRuntime, "rt", nil)
	missing := uuid.NewString()

	_, err := s.Create(ctx(t), &store.CreateParams{
		Kind: kindInstance, Name: "a", Spec: json.RawMessage(`{}`),
		Refs: []store.Ref{refTo(rt), {Kind: kindRuntime, ID: missing}},
	})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, missing)
	require.ErrorContains(t, err, kindRuntime)

	_, err = s.Create(ctx(t), &store.CreateParams{
		Kind: kindInstance, Name: "b", Spec: json.RawMessage(`{}`),
		Refs: []store.Ref{{Kind: kindGateway, ID: rt.ID}},
	})
	require.ErrorIs(t, err, store.ErrNotFound, "a reference names the kind too")

	// Duplicate references collapse into one.
	inst, err := s.Create(ctx(t), &store.CreateParams{
		Kind: kindInstance, Name: "c", Spec: json.RawMessage(`{}`), Refs: []store.Ref{refTo(rt), refTo(rt)},
	})
	require.NoError(t, err)
	deps, err := s.Dependents(ctx(t), rt.ID)
	require.NoError(t, err)
	require.Equal(t, []store.Ref{{Kind: kindInstance, ID: inst.ID, Name: "c"}}, deps)

	// A reference to an object whose deletion was requested is refused.
	other := create(t, s, kindRuntime, "going", nil)
	_, err = s.RequestDeletion(ctx(t), kindRuntime, other.ID, store.DeletionOptions{})
	require.NoError(t, err)
	_, err = s.Create(ctx(t), &store.CreateParams{
		Kind: kindInstance, Name: "d", Spec: json.RawMessage(`{}`), Refs: []store.Ref{refTo(other)},
	})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "being deleted")
}

func testDeletionProtection(t *testing.T, s store.Store) {
	rt := create(t, s, kindRuntime, "rt", nil)
	a := create(t, s, kindInstance, "a", nil, refTo(rt))
	g := create(t, s, kindGateway, "g", nil, refTo(rt), refTo(a))

	deps, err := s.Dependents(ctx(t), rt.ID)
	require.NoError(t, err)
	require.Equal(t, []store.Ref{
		{Kind: kindInstance, ID: a.ID, Name: "a"},
		{Kind: kindGateway, ID: g.ID, Name: "g"},
	}, deps)
	drain(t, s)

	_, err = s.RequestDeletion(ctx(t), kindRuntime, rt.ID, store.DeletionOptions{})
	var de *store.DependentsError
	require.ErrorAs(t, err, &de)
	require.Equal(t, deps, de.Dependents)
	got, err := s.Get(ctx(t), kindRuntime, rt.ID)
	require.NoError(t, err)
	require.Nil(t, got.DeletionRequestedAt)
	require.EqualValues(t, 1, got.ResourceVersion)
	require.Empty(t, outboxKeys(t, s))

	_, err = s.RequestDeletion(ctx(t), kindInstance, a.ID, store.DeletionOptions{})
	require.ErrorAs(t, err, &de)
	require.Equal(t, []store.Ref{{Kind: kindGateway, ID: g.ID, Name: "g"}}, de.Dependents)

	_, err = s.RequestDeletion(ctx(t), kindRuntime, uuid.NewString(), store.DeletionOptions{})
	require.ErrorIs(t, err, store.ErrNotFound)

	nothing, err := s.Dependents(ctx(t), uuid.NewString())
	require.NoError(t, err)
	require.Empty(t, nothing)
}

func testRequestDeletionOnce(t *testing.T, s store.Store) {
	obj := create(t, s, kindGateway, "g", map[string]string{"x": "y"})
	drain(t, s)
	first, err := s.RequestDeletion(ctx(t), kindGateway, obj.ID, store.DeletionOptions{})
	require.NoError(t, err)
	require.NotNil(t, first.DeletionRequestedAt)
	require.EqualValues(t, 2, first.ResourceVersion)
	require.EqualValues(t, 1, first.Generation)
	require.Equal(t, obj.Labels, first.Labels)
	require.Equal(t, []string{key(obj)}, outboxKeys(t, s))

	again, err := s.RequestDeletion(ctx(t), kindGateway, obj.ID, store.DeletionOptions{})
	require.NoError(t, err)
	require.True(t, first.DeletionRequestedAt.Equal(*again.DeletionRequestedAt), "set once")
	require.EqualValues(t, 2, again.ResourceVersion, "a repeated request changes nothing")
	require.Equal(t, []string{key(obj), key(obj)}, outboxKeys(t, s), "but re-notifies the controller")

	got, err := s.Get(ctx(t), kindGateway, obj.ID)
	require.NoError(t, err)
	requireSameObject(t, first, got)
}

func testFinalize(t *testing.T, s store.Store) {
	rt := create(t, s, kindRuntime, "rt", nil)
	other := create(t, s, kindRuntime, "rt2", nil)
	inst := create(t, s, kindInstance, "web", map[string]string{"app": "web"}, refTo(rt), refTo(other))
	require.NoError(t, s.AppendEvent(ctx(t), &store.Event{ObjectID: inst.ID, Type: "Normal", Reason: "Created"}))

	_, err := s.RequestDeletion(ctx(t), kindInstance, inst.ID, store.DeletionOptions{})
	require.NoError(t, err)
	drain(t, s)
	require.NoError(t, s.Finalize(ctx(t), kindInstance, inst.ID))

	_, err = s.Get(ctx(t), kindInstance, inst.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	res, err := s.List(ctx(t), &store.ListParams{Kind: kindInstance, Labels: map[string]string{"app": "web"}})
	require.NoError(t, err)
	require.Empty(t, res.Objects, "labels are gone")
	deps, err := s.Dependents(ctx(t), rt.ID)
	require.NoError(t, err)
	require.Empty(t, deps, "references are gone")
	evs, err := s.ListEvents(ctx(t), inst.ID, 0)
	require.NoError(t, err)
	require.Empty(t, evs, "events are gone")

	want := []string{key(rt), key(other)}
	sort.Strings(want)
	got := outboxKeys(t, s)
	sort.Strings(got)
	require.Equal(t, want, got, "the referenced objects are told, the finalized one is not")

	// What it referenced can go now.
	_, err = s.RequestDeletion(ctx(t), kindRuntime, rt.ID, store.DeletionOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Finalize(ctx(t), kindRuntime, rt.ID))

	require.ErrorIs(t, s.Finalize(ctx(t), kindRuntime, rt.ID), store.ErrNotFound, "finalize twice")
}

func testFinalizeNotDeleting(t *testing.T, s store.Store) {
	obj := create(t, s, kindGateway, "g", nil)
	require.ErrorIs(t, s.Finalize(ctx(t), kindGateway, obj.ID), store.ErrNotDeleting)
	_, err := s.Get(ctx(t), kindGateway, obj.ID)
	require.NoError(t, err)
	require.ErrorIs(t, s.Finalize(ctx(t), kindGateway, uuid.NewString()), store.ErrNotFound)
}

func testUpdateReplacesRefs(t *testing.T, s store.Store) {
	rt1 := create(t, s, kindRuntime, "rt1", nil)
	rt2 := create(t, s, kindRuntime, "rt2", nil)
	kept := create(t, s, kindGateway, "kept", nil)
	inst := create(t, s, kindInstance, "web", nil, refTo(rt1), refTo(kept))
	drain(t, s)

	_, err := s.UpdateSpec(ctx(t), &store.UpdateSpecParams{
		Kind: kindInstance, ID: inst.ID, Spec: inst.Spec, Refs: []store.Ref{refTo(rt2), refTo(kept)},
	})
	require.NoError(t, err)
	want := []string{key(rt1), key(inst)}
	sort.Strings(want)
	got := outboxKeys(t, s)
	sort.Strings(got)
	require.Equal(t, want, got, "the object no longer referenced is told, as the updated one is; the one still referenced and the new one are not")

	drain(t, s)
	_, err = s.UpdateSpec(ctx(t), &store.UpdateSpecParams{Kind: kindInstance, ID: inst.ID, Spec: inst.Spec, Refs: []store.Ref{refTo(rt2)}})
	require.NoError(t, err)
	got = outboxKeys(t, s)
	sort.Strings(got)
	want = []string{key(kept), key(inst)}
	sort.Strings(want)
	require.Equal(t, want, got)
	drain(t, s)
	_, err = s.UpdateSpec(ctx(t), &store.UpdateSpecParams{Kind: kindInstance, ID: inst.ID, Spec: inst.Spec})
	require.NoError(t, err)
	got = outboxKeys(t, s)
	sort.Strings(got)
	want = []string{key(rt2), key(inst)}
	sort.Strings(want)
	require.Equal(t, want, got, "dropping every reference tells each")
	_, err = s.UpdateSpec(ctx(t), &store.UpdateSpecParams{Kind: kindInstance, ID: inst.ID, Spec: inst.Spec, Refs: []store.Ref{refTo(rt2)}})
	require.NoError(t, err)

	deps, err := s.Dependents(ctx(t), rt1.ID)
	require.NoError(t, err)
	require.Empty(t, deps)
	deps, err = s.Dependents(ctx(t), rt2.ID)
	require.NoError(t, err)
	require.Equal(t, []store.Ref{{Kind: kindInstance, ID: inst.ID, Name: "web"}}, deps)

	_, err = s.RequestDeletion(ctx(t), kindRuntime, rt1.ID, store.DeletionOptions{})
	require.NoError(t, err, "no longer referenced")
}

func testStatusEnqueuesDependents(t *testing.T, s store.Store) {
	rt := create(t, s, kindRuntime, "rt", nil)
	a := create(t, s, kindInstance, "a", nil, refTo(rt))
	g := create(t, s, kindGateway, "g", nil, refTo(rt))
	create(t, s, kindInstance, "unrelated", nil)
	drain(t, s)

	_, err := s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindRuntime, ID: rt.ID, Status: json.RawMessage(`{"phase":"Ready"}`),
	})
	require.NoError(t, err)
	want := []string{key(a), key(g)}
	sort.Strings(want)
	got := outboxKeys(t, s)
	sort.Strings(got)
	require.Equal(t, want, got)

	drain(t, s)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindGateway, ID: g.ID, Status: json.RawMessage(`{"phase":"Ready"}`),
	})
	require.NoError(t, err)
	require.Empty(t, outboxKeys(t, s), "nothing references the gateway")

	drain(t, s)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindRuntime, ID: rt.ID, Status: json.RawMessage(`{"phase":"Ready","message":"only the message changed"}`),
	})
	require.NoError(t, err)
	require.Empty(t, outboxKeys(t, s), "a status change that keeps phase and observed generation does not notify dependents")

	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindRuntime, ID: rt.ID, Status: json.RawMessage(`{"phase":"Ready","observed_generation":2}`),
	})
	require.NoError(t, err)
	require.Len(t, outboxKeys(t, s), 2, "a new observed generation notifies dependents")

	// a is reconciled; g still waits.
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindInstance, ID: a.ID, Status: json.RawMessage(fmt.Sprintf(`{"phase":"Ready","observed_generation":%d}`, a.Generation)),
	})
	require.NoError(t, err)
	drain(t, s)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindRuntime, ID: rt.ID, Status: json.RawMessage(`{"phase":"Reconciling","observed_generation":2}`),
	})
	require.NoError(t, err)
	require.Len(t, outboxKeys(t, s), 2, "leaving Ready notifies every dependent, reconciled ones too (a lost runtime fails over)")

	drain(t, s)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
		Kind: kindRuntime, ID: rt.ID, Status: json.RawMessage(`{"phase":"Ready","observed_generation":2}`),
	})
	require.NoError(t, err)
	require.Equal(t, []string{key(g)}, outboxKeys(t, s), "Ready again at the same generation notifies only the dependents that wait")
}

func testStatusEnqueuesOwners(t *testing.T, s store.Store) {
	owner := create(t, s, kindInstance, "owner", nil)
	other := create(t, s, kindGateway, "other-owner", nil)
	owned, err := s.Create(ctx(t), &store.CreateParams{Kind: kindGateway, Name: "owned", Spec: json.RawMessage(`{}`),
		Owners: []store.Ref{refTo(owner), refTo(other)}})
	require.NoError(t, err)
	create(t, s, kindInstance, "unrelated", nil)
	setStatus := func(o *store.Object, status string) {
		t.Helper()
		_, err := s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: o.Kind, ID: o.ID, Status: json.RawMessage(status)})
		require.NoError(t, err)
	}
	ready := func(o *store.Object) string {
		return fmt.Sprintf(`{"phase":"Ready","observed_generation":%d}`, o.Generation)
	}
	drain(t, s)

	setStatus(owned, ready(owned))
	want := []string{key(owner), key(other)}
	sort.Strings(want)
	got := outboxKeys(t, s)
	sort.Strings(got)
	require.Equal(t, want, got, "becoming Ready notifies both owners, which wait on it (neither is reconciled)")

	setStatus(owner, ready(owner))
	drain(t, s)
	setStatus(owned, `{"phase":"Reconciling","observed_generation":1}`)
	got = outboxKeys(t, s)
	sort.Strings(got)
	require.Equal(t, want, got, "leaving Ready notifies every owner, reconciled ones too")

	drain(t, s)
	setStatus(owned, ready(owned))
	require.Equal(t, []string{key(other)}, outboxKeys(t, s), "Ready again at the same generation notifies only the owners that wait")

	drain(t, s)
	setStatus(owned, `{"phase":"Ready","observed_generation":1,"message":"only the message changed"}`)
	require.Empty(t, outboxKeys(t, s), "a status change that keeps phase and observed generation notifies no owner")

	// An owner that is gone is not notified.
	_, err = s.RequestDeletion(ctx(t), kindGateway, other.ID, store.DeletionOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Finalize(ctx(t), kindGateway, other.ID))
	drain(t, s)
	setStatus(owned, `{"phase":"Reconciling","observed_generation":1}`)
	require.Equal(t, []string{key(owner)}, outboxKeys(t, s))
}

func testListPendingAndOwned(t *testing.T, s store.Store) {
	rt := create(t, s, kindRuntime, "rt", nil)
	ready := create(t, s, kindInstance, "ready", nil)
	_, err := s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindInstance, ID: ready.ID,
		Status: json.RawMessage(fmt.Sprintf(`{"phase":"Ready","observed_generation":%d}`, ready.Generation))})
	require.NoError(t, err)
	old := create(t, s, kindInstance, "old", nil)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindInstance, ID: old.ID,
		Status: json.RawMessage(fmt.Sprintf(`{"phase":"Ready","observed_generation":%d}`, old.Generation-1))})
	require.NoError(t, err)
	failed := create(t, s, kindInstance, "failed", nil)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindInstance, ID: failed.ID,
		Status: json.RawMessage(fmt.Sprintf(`{"phase":"Failed","observed_generation":%d}`, failed.Generation))})
	require.NoError(t, err)
	create(t, s, kindInstance, "fresh", nil)
	owned, err := s.Create(ctx(t), &store.CreateParams{Kind: kindInstance, Name: "owned", Spec: json.RawMessage(`{}`),
		Owners: []store.Ref{refTo(rt)}})
	require.NoError(t, err)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindInstance, ID: owned.ID,
		Status: json.RawMessage(fmt.Sprintf(`{"phase":"Ready","observed_generation":%d}`, owned.Generation))})
	require.NoError(t, err)

	names := func(p store.ListParams) []string {
		t.Helper()
		p.Kind = kindInstance
		var out []string
		for {
			res, err := s.List(ctx(t), &p)
			require.NoError(t, err)
			for _, o := range res.Objects {
				out = append(out, o.Name)
			}
			if res.Next == "" {
				n, err := s.Count(ctx(t), &p)
				require.NoError(t, err)
				require.Equal(t, len(out), n, "Count counts what the pages list")
				sort.Strings(out)
				return out
			}
			p.After = res.Next
		}
	}
	require.Equal(t, []string{"failed", "fresh", "old"}, names(store.ListParams{Pending: true}),
		"not Ready, Ready at an older generation, never reconciled; never the reconciled ones")
	require.Equal(t, []string{"failed", "fresh", "old"}, names(store.ListParams{Pending: true, Limit: 1}), "paged")
	require.Equal(t, []string{"owned"}, names(store.ListParams{Owned: true}))
	require.Nil(t, names(store.ListParams{Pending: true, Owned: true}))

	_, err = s.RequestDeletion(ctx(t), kindInstance, ready.ID, store.DeletionOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"failed", "fresh", "old", "ready"}, names(store.ListParams{Pending: true}), "a deletion requested is pending")
}

func testStatusRefs(t *testing.T, s store.Store) {
	rt1 := create(t, s, kindRuntime, "rt1", nil)
	rt2 := create(t, s, kindRuntime, "rt2", nil)
	gone := create(t, s, kindRuntime, "gone", nil)
	inst := create(t, s, kindInstance, "web", nil, refTo(rt1))
	setStatusRefs := func(refs ...store.Ref) {
		t.Helper()
		_, err := s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindInstance, ID: inst.ID, Status: json.RawMessage(`{}`), Refs: &refs})
		require.NoError(t, err)
	}
	_, err := s.RequestDeletion(ctx(t), kindRuntime, gone.ID, store.DeletionOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Finalize(ctx(t), kindRuntime, gone.ID))

	// The status names rt1 (also in the spec), rt2, and a runtime deleted since: that one is skipped.
	setStatusRefs(refTo(rt1), refTo(rt2), refTo(gone))
	for _, rt := range []*store.Object{rt1, rt2} {
		deps, err := s.Dependents(ctx(t), rt.ID)
		require.NoError(t, err)
		require.Equal(t, []store.Ref{{Kind: kindInstance, ID: inst.ID, Name: "web"}}, deps, "one dependent, however many edges")
		_, err = s.RequestDeletion(ctx(t), kindRuntime, rt.ID, store.DeletionOptions{})
		var de *store.DependentsError
		require.ErrorAs(t, err, &de)
	}
	drain(t, s)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindRuntime, ID: rt2.ID, Status: json.RawMessage(`{"phase":"Ready"}`)})
	require.NoError(t, err)
	require.Equal(t, []string{key(inst)}, outboxKeys(t, s), "a status reference notifies like a spec reference")

	// A spec update keeps the status's references, and a status write without Refs keeps them too.
	_, err = s.UpdateSpec(ctx(t), &store.UpdateSpecParams{Kind: kindInstance, ID: inst.ID, Spec: inst.Spec})
	require.NoError(t, err)
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindInstance, ID: inst.ID, Status: json.RawMessage(`{"phase":"Ready"}`)})
	require.NoError(t, err)
	deps, err := s.Dependents(ctx(t), rt2.ID)
	require.NoError(t, err)
	require.Len(t, deps, 1)
	deps, err = s.Dependents(ctx(t), rt1.ID)
	require.NoError(t, err)
	require.Len(t, deps, 1, "still referenced by the status")

	// The same targets again, in another order and twice over, keep them; a new set replaces the old.
	rt3 := create(t, s, kindRuntime, "rt3", nil)
	setStatusRefs(refTo(rt2), refTo(rt1), refTo(rt2))
	for _, rt := range []*store.Object{rt1, rt2} {
		deps, err := s.Dependents(ctx(t), rt.ID)
		require.NoError(t, err)
		require.Len(t, deps, 1)
	}
	setStatusRefs(refTo(rt2), refTo(rt3))
	setStatusRefs(refTo(rt3), refTo(rt2))
	deps, err = s.Dependents(ctx(t), rt3.ID)
	require.NoError(t, err)
	require.Len(t, deps, 1, "rt3 is referenced by the status now")
	setStatusRefs(refTo(rt2))
	deps, err = s.Dependents(ctx(t), rt3.ID)
	require.NoError(t, err)
	require.Empty(t, deps, "rt3 left the status")

	// Moving off rt2 releases it.
	setStatusRefs()
	_, err = s.RequestDeletion(ctx(t), kindRuntime, rt2.ID, store.DeletionOptions{})
	require.NoError(t, err)
	_, err = s.RequestDeletion(ctx(t), kindRuntime, rt1.ID, store.DeletionOptions{})
	require.NoError(t, err, "neither spec nor status references rt1 now")
}

func testOutbox(t *testing.T, s store.Store) {
	var (
		want []string
		objs []*store.Object
	)
	for i := range 5 {
		obj := create(t, s, kindGateway, fmt.Sprintf("g%d", i), nil)
		objs = append(objs, obj)
		want = append(want, key(obj))
	}
	upd, err := s.UpdateSpec(ctx(t), &store.UpdateSpecParams{Kind: kindGateway, ID: objs[0].ID, Spec: json.RawMessage(`{"x":1}`)})
	require.NoError(t, err)
	want = append(want, key(upd))
	require.NoError(t, s.Enqueue(ctx(t), kindGateway, upd.ID))
	want = append(want, key(upd))
	require.ErrorIs(t, s.Enqueue(ctx(t), kindGateway, uuid.NewString()), store.ErrNotFound)
	require.ErrorIs(t, s.Enqueue(ctx(t), kindRuntime, upd.ID), store.ErrNotFound)

	entries, err := s.PendingOutbox(ctx(t), 100)
	require.NoError(t, err)
	require.Len(t, entries, len(want))
	for i, e := range entries {
		require.Equal(t, want[i], e.Kind+"/"+e.ObjectID, "entry %d", i)
		require.False(t, e.CreatedAt.IsZero())
		if i > 0 {
			require.Greater(t, e.ID, entries[i-1].ID)
		}
	}

	page, err := s.PendingOutbox(ctx(t), 3)
	require.NoError(t, err)
	require.Equal(t, entries[:3], page)

	require.NoError(t, s.DeleteOutbox(ctx(t), []int64{entries[0].ID, entries[2].ID}))
	require.NoError(t, s.DeleteOutbox(ctx(t), []int64{entries[0].ID}), "deleting twice is fine")
	require.NoError(t, s.DeleteOutbox(ctx(t), nil))
	rest, err := s.PendingOutbox(ctx(t), 100)
	require.NoError(t, err)
	require.Equal(t, append([]*store.OutboxEntry{entries[1]}, entries[3:]...), rest)
}

func testOutboxStats(t *testing.T, s store.Store) {
	n, age, err := s.OutboxStats(ctx(t))
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, age)

	create(t, s, kindGateway, "a", nil)
	create(t, s, kindGateway, "b", nil)
	n, age, err = s.OutboxStats(ctx(t))
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	require.GreaterOrEqual(t, age, time.Duration(0))
	require.Less(t, age, time.Minute)
}

func testEventsRetention(t *testing.T, s store.Store) {
	obj := create(t, s, kindInstance, "web", nil)
	other := create(t, s, kindInstance, "other", nil)
	require.NoError(t, s.AppendEvent(ctx(t), &store.Event{ObjectID: other.ID, Type: "Normal", Reason: "Kept"}))

	const total = store.EventRetention + 5
	for i := range total {
		ev := &store.Event{
			ObjectID: obj.ID, Type: "Normal", Reason: "Reconciled", Message: fmt.Sprintf("m%03d", i),
			Generation: 1, DurationMS: int64(i), Source: "controller",
		}
		require.NoError(t, s.AppendEvent(ctx(t), ev))
		require.NotZero(t, ev.ID)
		require.Equal(t, kindInstance, ev.Kind, "kind is filled in")
		require.False(t, ev.CreatedAt.IsZero())
	}

	all, err := s.ListEvents(ctx(t), obj.ID, 0)
	require.NoError(t, err)
	require.Len(t, all, store.EventRetention)
	require.Equal(t, "m005", all[0].Message, "the oldest were dropped")
	require.Equal(t, fmt.Sprintf("m%03d", total-1), all[len(all)-1].Message)
	for i := 1; i < len(all); i++ {
		require.Greater(t, all[i].ID, all[i-1].ID, "oldest first")
	}
	require.Equal(t, "controller", all[0].Source)
	require.EqualValues(t, 5, all[0].DurationMS)

	newest, err := s.ListEvents(ctx(t), obj.ID, 3)
	require.NoError(t, err)
	require.Equal(t, []string{"m202", "m203", "m204"}, []string{newest[0].Message, newest[1].Message, newest[2].Message})

	kept, err := s.ListEvents(ctx(t), other.ID, 10)
	require.NoError(t, err)
	require.Len(t, kept, 1, "retention is per object")
}

func testEventsRepeat(t *testing.T, s store.Store) {
	obj := create(t, s, kindInstance, "web", nil)
	other := create(t, s, kindInstance, "other", nil)
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	waiting := func(at time.Duration, ms int64) *store.Event {
		return &store.Event{ObjectID: obj.ID, Type: "Normal", Reason: "WaitingForRuntime", Message: `waiting for kubernetes_runtime "us" (Provisioning)`,
			Generation: 1, DurationMS: ms, Source: "controller", CreatedAt: t0.Add(at)}
	}
	first := waiting(0, 3)
	require.NoError(t, s.AppendEvent(ctx(t), first))
	require.EqualValues(t, 1, first.Count)
	require.True(t, first.LastSeenAt.Equal(first.CreatedAt))

	for i := 1; i <= 11; i++ {
		ev := waiting(time.Duration(i)*5*time.Second, int64(i))
		require.NoError(t, s.AppendEvent(ctx(t), ev))
		require.Equal(t, first.ID, ev.ID, "a repeat is counted on the first row")
		require.EqualValues(t, i+1, ev.Count)
		require.True(t, ev.CreatedAt.Equal(t0), "first seen stays: %s", ev.CreatedAt)
		require.True(t, ev.LastSeenAt.Equal(t0.Add(time.Duration(i)*5*time.Second)), "last seen moves: %s", ev.LastSeenAt)
	}
	evs, err := s.ListEvents(ctx(t), obj.ID, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1, "a minute of waiting is one row")
	require.EqualValues(t, 12, evs[0].Count)
	require.True(t, evs[0].CreatedAt.Equal(t0))
	require.True(t, evs[0].LastSeenAt.Equal(t0.Add(55*time.Second)))
	require.EqualValues(t, 11, evs[0].DurationMS, "the latest duration")

	// What differs is a new row: another message, reason, type, source, generation or object.
	variants := []*store.Event{
		{ObjectID: obj.ID, Type: "Normal", Reason: "WaitingForRuntime", Message: `waiting for kubernetes_runtime "eu" (Provisioning)`, Generation: 1, Source: "controller"},
		{ObjectID: obj.ID, Type: "Normal", Reason: "Reconciled", Message: `waiting for kubernetes_runtime "us" (Provisioning)`, Generation: 1, Source: "controller"},
		{ObjectID: obj.ID, Type: "Warning", Reason: "WaitingForRuntime", Message: `waiting for kubernetes_runtime "us" (Provisioning)`, Generation: 1, Source: "controller"},
		{ObjectID: obj.ID, Type: "Normal", Reason: "WaitingForRuntime", Message: `waiting for kubernetes_runtime "us" (Provisioning)`, Generation: 1, Source: "agent"},
		{ObjectID: obj.ID, Type: "Normal", Reason: "WaitingForRuntime", Message: `waiting for kubernetes_runtime "us" (Provisioning)`, Generation: 2, Source: "controller"},
		{ObjectID: other.ID, Type: "Normal", Reason: "WaitingForRuntime", Message: `waiting for kubernetes_runtime "us" (Provisioning)`, Generation: 1, Source: "controller"},
	}
	for _, ev := range variants {
		ev.CreatedAt = t0.Add(time.Minute)
		require.NoError(t, s.AppendEvent(ctx(t), ev))
		require.EqualValues(t, 1, ev.Count, "%+v is new", ev)
		require.NotEqual(t, first.ID, ev.ID)
	}

	// An interleaved event does not split the count: the repeat still finds its row.
	again := waiting(2*time.Minute, 1)
	require.NoError(t, s.AppendEvent(ctx(t), again))
	require.Equal(t, first.ID, again.ID)
	require.EqualValues(t, 13, again.Count)

	// Past the window since it was last seen, it is a new row.
	later := waiting(2*time.Minute+store.EventRepeatWindow+time.Second, 1)
	require.NoError(t, s.AppendEvent(ctx(t), later))
	require.NotEqual(t, first.ID, later.ID)
	require.EqualValues(t, 1, later.Count)
	evs, err = s.ListEvents(ctx(t), obj.ID, 0)
	require.NoError(t, err)
	require.Len(t, evs, 7)
	require.EqualValues(t, 13, evs[0].Count)
	require.EqualValues(t, 1, evs[6].Count)
}

func testEventsMissingObject(t *testing.T, s store.Store) {
	err := s.AppendEvent(ctx(t), &store.Event{ObjectID: uuid.NewString(), Type: "Normal", Reason: "X"})
	require.ErrorIs(t, err, store.ErrNotFound)
	evs, err := s.ListEvents(ctx(t), uuid.NewString(), 10)
	require.NoError(t, err)
	require.Empty(t, evs)
}

func testEventsDefaultGeneration(t *testing.T, s store.Store) {
	obj := create(t, s, kindInstance, "evgen", nil)
	_, err := s.UpdateSpec(ctx(t), &store.UpdateSpecParams{Kind: kindInstance, ID: obj.ID, Spec: json.RawMessage(`{"v":2}`)})
	require.NoError(t, err)
	ev := &store.Event{ObjectID: obj.ID, Kind: kindInstance, Type: "Normal", Reason: "Rolled"}
	require.NoError(t, s.AppendEvent(ctx(t), ev))
	require.EqualValues(t, 2, ev.Generation)
	old := &store.Event{ObjectID: obj.ID, Kind: kindInstance, Type: "Normal", Reason: "Rolled", Generation: 1}
	require.NoError(t, s.AppendEvent(ctx(t), old))
	require.EqualValues(t, 1, old.Generation, "a generation given is kept")
	evs, err := s.ListEvents(ctx(t), obj.ID, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	gens := []int64{evs[0].Generation, evs[1].Generation}
	require.ElementsMatch(t, []int64{1, 2}, gens)

	err = s.AppendEvent(ctx(t), &store.Event{ObjectID: obj.ID, Kind: kindRuntime, Type: "Normal", Reason: "X"})
	require.ErrorIs(t, err, store.ErrNotFound, "an event names the object's own kind")
}

func testTokens(t *testing.T, s store.Store) {
	tok := &store.Token{Hash: "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8", Name: "admin", Role: "admin"}
	require.NoError(t, s.CreateToken(ctx(t), tok))
	require.False(t, tok.CreatedAt.IsZero())

	got, err := s.GetToken(ctx(t), tok.Hash)
	require.NoError(t, err)
	require.Equal(t, tok.Hash, got.Hash)
	require.Equal(t, "admin", got.Name)
	require.Equal(t, "admin", got.Role)
	require.True(t, tok.CreatedAt.Equal(got.CreatedAt))

	err = s.CreateToken(ctx(t), &store.Token{Hash: tok.Hash, Name: "again", Role: "viewer"})
	require.ErrorIs(t, err, store.ErrNameTaken)
	_, err = s.GetToken(ctx(t), "unknown")
	require.ErrorIs(t, err, store.ErrNotFound)

	t.Run("tokens are listed with their id and expiry, and revoked by id", func(t *testing.T) {
		exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		ci := &store.Token{Hash: strings.Repeat("ab", 32), Name: "ci", Role: "developer", ExpiresAt: &exp}
		require.NoError(t, s.CreateToken(ctx(t), ci))
		require.Equal(t, strings.Repeat("ab", 8), ci.ID, "the id defaults to the hash's first 16 digits")
		list, err := s.ListTokens(ctx(t))
		require.NoError(t, err)
		var found *store.Token
		for _, tk := range list {
			if tk.ID == ci.ID {
				found = tk
			}
		}
		require.NotNil(t, found)
		require.Equal(t, "ci", found.Name)
		require.NotNil(t, found.ExpiresAt)
		require.True(t, exp.Equal(*found.ExpiresAt), "%v != %v", exp, *found.ExpiresAt)

		require.NoError(t, s.DeleteToken(ctx(t), ci.ID))
		_, err = s.GetToken(ctx(t), ci.Hash)
		require.ErrorIs(t, err, store.ErrNotFound, "a revoked token is gone")
		require.ErrorIs(t, s.DeleteToken(ctx(t), ci.ID), store.ErrNotFound)
	})
}

func testFailedCreateAtomic(t *testing.T, s store.Store) {
	_, err := s.Create(ctx(t), &store.CreateParams{
		Kind: kindInstance, Name: "orphan", Labels: map[string]string{"a": "b"}, Spec: json.RawMessage(`{}`),
		Refs: []store.Ref{{Kind: kindRuntime, ID: uuid.NewString()}},
	})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetByName(ctx(t), kindInstance, "orphan")
	require.ErrorIs(t, err, store.ErrNotFound)
	res, err := s.List(ctx(t), &store.ListParams{Kind: kindInstance})
	require.NoError(t, err)
	require.Empty(t, res.Objects)
	require.Empty(t, outboxKeys(t, s))

	_, err = s.Create(ctx(t), &store.CreateParams{Kind: kindInstance, Name: "bad", Spec: json.RawMessage(`{"a":`)})
	require.Error(t, err)
	_, err = s.GetByName(ctx(t), kindInstance, "bad")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Empty(t, outboxKeys(t, s))

	// The name is still free.
	create(t, s, kindInstance, "orphan", nil)
}

func testFailedUpdateAtomic(t *testing.T, s store.Store) {
	rt := create(t, s, kindRuntime, "rt", nil)
	inst := create(t, s, kindInstance, "web", map[string]string{"keep": "me"}, refTo(rt))
	drain(t, s)

	_, err := s.UpdateSpec(ctx(t), &store.UpdateSpecParams{
		Kind: kindInstance, ID: inst.ID, Labels: map[string]string{"new": "labels"}, Spec: json.RawMessage(`{"changed":true}`),
		Refs: []store.Ref{{Kind: kindRuntime, ID: uuid.NewString()}},
	})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.True(t, errors.Is(err, store.ErrNotFound))

	got, err := s.Get(ctx(t), kindInstance, inst.ID)
	require.NoError(t, err)
	requireSameObject(t, inst, got)
	deps, err := s.Dependents(ctx(t), rt.ID)
	require.NoError(t, err)
	require.Len(t, deps, 1, "references unchanged")
	require.Empty(t, outboxKeys(t, s))
}

func testDeleteVersusReference(t *testing.T, s store.Store) {
	for i := range 10 {
		target := create(t, s, kindRuntime, fmt.Sprintf("rt%d", i), nil)
		var (
			wg        sync.WaitGroup
			start     = make(chan struct{})
			delErr    error
			createErr error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, delErr = s.RequestDeletion(ctx(t), kindRuntime, target.ID, store.DeletionOptions{})
		}()
		go func() {
			defer wg.Done()
			<-start
			_, createErr = s.Create(ctx(t), &store.CreateParams{
				Kind: kindInstance, Name: fmt.Sprintf("web%d", i), Spec: json.RawMessage(`{}`), Refs: []store.Ref{refTo(target)},
			})
		}()
		close(start)
		wg.Wait()
		if delErr == nil {
			require.ErrorIs(t, createErr, store.ErrNotFound, "round %d: deletion won, the reference must lose", i)
			deps, err := s.Dependents(ctx(t), target.ID)
			require.NoError(t, err)
			require.Empty(t, deps)
		} else {
			var de *store.DependentsError
			require.ErrorAs(t, delErr, &de, "round %d", i)
			require.NoError(t, createErr, "round %d: the reference won", i)
		}
	}
}

func testConcurrentIfMatch(t *testing.T, s store.Store) {
	obj := create(t, s, kindInstance, "web", nil)
	const n = 6
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if i%2 == 0 {
				_, errs[i] = s.UpdateSpec(ctx(t), &store.UpdateSpecParams{
					Kind: kindInstance, ID: obj.ID, IfMatch: obj.ResourceVersion, Spec: json.RawMessage(fmt.Sprintf(`{"by":%d}`, i)),
				})
			} else {
				_, errs[i] = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{
					Kind: kindInstance, ID: obj.ID, IfMatch: obj.ResourceVersion, Status: json.RawMessage(fmt.Sprintf(`{"by":%d}`, i)),
				})
			}
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		require.ErrorIs(t, err, store.ErrStale)
	}
	require.Equal(t, 1, wins)
	got, err := s.Get(ctx(t), kindInstance, obj.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, got.ResourceVersion)
}

func testListByReference(t *testing.T, s store.Store) {
	rt := create(t, s, kindRuntime, "rt", nil)
	other := create(t, s, kindRuntime, "other", nil)
	a := create(t, s, kindInstance, "a", nil, refTo(rt))
	b := create(t, s, kindInstance, "b", nil, refTo(rt))
	create(t, s, kindInstance, "c", nil, refTo(other))
	create(t, s, kindInstance, "d", nil)
	create(t, s, kindGateway, "g", nil, refTo(rt))

	res, err := s.List(ctx(t), &store.ListParams{Kind: kindInstance, References: rt.ID})
	require.NoError(t, err)
	var ids []string
	for _, o := range res.Objects {
		ids = append(ids, o.ID)
	}
	want := []string{a.ID, b.ID}
	sort.Strings(want)
	require.Equal(t, want, ids, "only instances that reference rt, and no other kind")

	res, err = s.List(ctx(t), &store.ListParams{Kind: kindInstance, References: uuid.NewString()})
	require.NoError(t, err)
	require.Empty(t, res.Objects)

	// A reference made by both the spec and the status lists the object once.
	_, err = s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindInstance, ID: a.ID, Status: json.RawMessage(`{}`), Refs: &[]store.Ref{refTo(rt)}})
	require.NoError(t, err)
	// Pages of a reference filter, alone and with labels (the page bound goes into the index lookup), have
	// no gap and no duplicate.
	for i := range 9 {
		labels := map[string]string{"env": "prod"}
		if i%3 == 0 {
			labels["env"] = "dev"
		}
		o := create(t, s, kindInstance, fmt.Sprintf("paged-%d", i), labels, refTo(rt))
		want = append(want, o.ID)
	}
	create(t, s, kindInstance, "paged-other", map[string]string{"env": "prod"}, refTo(other))
	sort.Strings(want)
	page := func(labels map[string]string) []string {
		var got []string
		after := ""
		for {
			res, err := s.List(ctx(t), &store.ListParams{Kind: kindInstance, References: rt.ID, Labels: labels, Limit: 2, After: after})
			require.NoError(t, err)
			for _, o := range res.Objects {
				got = append(got, o.ID)
			}
			if res.Next == "" {
				n, err := s.Count(ctx(t), &store.ListParams{Kind: kindInstance, References: rt.ID, Labels: labels, After: "ignored"})
				require.NoError(t, err)
				require.Equal(t, len(got), n, "Count counts what the pages list, and ignores After")
				return got
			}
			after = res.Next
		}
	}
	require.Equal(t, want, page(nil), "every instance that references rt, once, in id order")
	var prod []string
	for _, id := range want {
		if o, err := s.Get(ctx(t), kindInstance, id); err == nil && o.Labels["env"] == "prod" {
			prod = append(prod, id)
		}
	}
	require.Len(t, prod, 6)
	require.Equal(t, prod, page(map[string]string{"env": "prod"}), "the instances that reference rt and carry the label")
}

func testCountObjects(t *testing.T, s store.Store) {
	mk := func(kind, name, spec, status string) *store.Object {
		t.Helper()
		obj, err := s.Create(ctx(t), &store.CreateParams{Kind: kind, Name: name, Spec: json.RawMessage(spec), Status: json.RawMessage(status)})
		require.NoError(t, err)
		return obj
	}
	// A runtime with no status is Pending; one Ready at an older generation is not reconciled.
	pending := mk(kindRuntime, "pending", `{"region":"us-east"}`, `{}`)
	mk(kindRuntime, "ready", `{"region":"eu-west"}`,
		`{"phase":"Ready","observed_generation":1,"conditions":[{"type":"Ready","status":"False"},{"type":"Connected","status":"True"}]}`)
	behind := mk(kindRuntime, "behind", `{}`, `{"phase":"Ready","observed_generation":0,"conditions":[{"type":"Connected","status":"False"}]}`)
	failed := mk(kindInstance, "failed", `{}`, `{"phase":"Failed","observed_generation":1}`)
	deleting := mk(kindInstance, "deleting", `{}`, `{"phase":"Ready","observed_generation":1}`)
	deleting, err := s.RequestDeletion(ctx(t), kindInstance, deleting.ID, store.DeletionOptions{})
	require.NoError(t, err)

	t.Run("by kind: every phase counted, unreconciled since the oldest last write", func(t *testing.T) {
		counts, err := s.CountObjects(ctx(t), &store.CountParams{GroupBy: []string{"kind"}})
		require.NoError(t, err)
		type group struct {
			count, unreconciled int64
			oldest              time.Time
		}
		got := map[string]group{}
		for _, c := range counts {
			require.Len(t, c.Values, 1)
			require.Empty(t, c.Condition, "no condition asked for")
			got[c.Values[0]+"/"+c.Phase] = group{c.Count, c.Unreconciled, c.OldestUnreconciled}
		}
		require.Equal(t, map[string]group{
			kindRuntime + "/Pending": {1, 1, pending.UpdatedAt},
			kindRuntime + "/Ready":   {2, 1, behind.UpdatedAt},
			kindInstance + "/Failed": {1, 1, failed.UpdatedAt},
			kindInstance + "/Ready":  {1, 1, deleting.UpdatedAt}, // deletion requested
		}, got)
	})

	t.Run("a reconciled object has no oldest unreconciled", func(t *testing.T) {
		_, err := s.UpdateStatus(ctx(t), &store.UpdateStatusParams{Kind: kindRuntime, ID: behind.ID,
			Status: json.RawMessage(`{"phase":"Ready","observed_generation":1}`)})
		require.NoError(t, err)
		counts, err := s.CountObjects(ctx(t), &store.CountParams{Kind: kindRuntime})
		require.NoError(t, err)
		for _, c := range counts {
			require.Empty(t, c.Values)
			if c.Phase == "Ready" {
				require.Equal(t, int64(2), c.Count)
				require.Zero(t, c.Unreconciled)
				require.True(t, c.OldestUnreconciled.IsZero())
			}
		}
		require.Len(t, counts, 2)
	})

	t.Run("by id, spec and status fields, and a condition's status", func(t *testing.T) {
		counts, err := s.CountObjects(ctx(t), &store.CountParams{Kind: kindRuntime,
			GroupBy: []string{"name", "spec.region", "status.missing"}, Condition: "Connected"})
		require.NoError(t, err)
		got := map[string]string{}
		for _, c := range counts {
			require.Equal(t, int64(1), c.Count)
			got[strings.Join(c.Values, ",")] = c.Phase + "/" + c.Condition
		}
		require.Equal(t, map[string]string{
			"pending,us-east,": "Pending/",
			"ready,eu-west,":   "Ready/True",
			"behind,,":         "Ready/", // its status no longer has the condition
		}, got)
	})

	t.Run("an unknown kind counts nothing", func(t *testing.T) {
		counts, err := s.CountObjects(ctx(t), &store.CountParams{Kind: "nothing", GroupBy: []string{"id"}})
		require.NoError(t, err)
		require.Empty(t, counts)
	})

	t.Run("only plain fields may group", func(t *testing.T) {
		for _, f := range []string{"spec", "generation", "spec.region'); DROP TABLE objects; --", "spec.a.b", "labels.env"} {
			_, err := s.CountObjects(ctx(t), &store.CountParams{GroupBy: []string{f}})
			require.Error(t, err, f)
		}
	})
}
