package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

var objectsSeries = regexp.MustCompile(`(?m)^qleet_objects\{kind="([^"]+)",phase="([^"]+)"\} (\S+)$`)

// objectGauges reads qleet_objects and qleet_objects_unreconciled from an exposition, by "kind/phase" and
// by kind, and the kinds whose qleet_oldest_unreconciled_age_seconds is not 0.
func objectGauges(t *testing.T, text string) (objects, unreconciled map[string]float64, aged map[string]bool) {
	t.Helper()
	objects, unreconciled, aged = map[string]float64{}, map[string]float64{}, map[string]bool{}
	for _, m := range objectsSeries.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err)
		objects[m[1]+"/"+m[2]] = v
	}
	for _, ki := range api.Kinds() {
		unreconciled[ki.Kind] = sample(t, text, `qleet_objects_unreconciled{kind="`+ki.Kind+`"}`)
		aged[ki.Kind] = sample(t, text, `qleet_oldest_unreconciled_age_seconds{kind="`+ki.Kind+`"}`) > 0
	}
	return objects, unreconciled, aged
}

// requireGaugesAreFullCount scrapes e and compares the object gauges with a full aggregation of every
// object in the store: every kind has a series per standard phase (0 when empty), and every other series
// is a group that has objects.
func requireGaugesAreFullCount(ctx context.Context, t *testing.T, e *env, msg string) {
	t.Helper()
	full, err := e.store.CountObjects(ctx, &store.CountParams{GroupBy: []string{"kind"}})
	require.NoError(t, err)
	wantObjects, wantUnrec, wantAged := map[string]float64{}, map[string]float64{}, map[string]bool{}
	for _, ki := range api.Kinds() {
		for _, p := range []api.Phase{api.PhasePending, api.PhaseReconciling, api.PhaseReady, api.PhaseFailed, api.PhaseDeleting} {
			wantObjects[ki.Kind+"/"+string(p)] = 0
		}
		wantUnrec[ki.Kind], wantAged[ki.Kind] = 0, false
	}
	for _, c := range full {
		wantObjects[c.Values[0]+"/"+c.Phase] += float64(c.Count)
		wantUnrec[c.Values[0]] += float64(c.Unreconciled)
		wantAged[c.Values[0]] = wantAged[c.Values[0]] || c.Unreconciled > 0
	}
	objects, unrec, aged := objectGauges(t, e.scrape(t))
	require.Equal(t, wantObjects, objects, "%s: qleet_objects", msg)
	require.Equal(t, wantUnrec, unrec, "%s: qleet_objects_unreconciled", msg)
	require.Equal(t, wantAged, aged, "%s: qleet_oldest_unreconciled_age_seconds is set where objects are unreconciled", msg)
}

// TestObjectGaugesAreExactAcrossReplicas runs two API servers on one database, each with its own store
// (two replicas), folding the count deltas every few milliseconds, and makes random creates, status
// changes (phase transitions, observed generation behind or not), spec changes, deletions and
// finalizations through both: after every round, each replica's gauges equal a full count.
func TestObjectGaugesAreExactAcrossReplicas(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(testing.TB) string{
		"sqlite":   func(t testing.TB) string { return "sqlite://" + filepath.Join(t.TempDir(), "qleet.db") },
		"postgres": func(t testing.TB) string { return pgtest.URL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			u := url(t)
			replica := func(interval time.Duration) *env {
				st, err := store.Open(ctx, store.Config{URL: u, Logger: quietLogger(), CountsCompactInterval: interval})
				require.NoError(t, err)
				t.Cleanup(func() { _ = st.Close() })
				return setup(t, setupOpts{st: st})
			}
			replicas := []*env{replica(5 * time.Millisecond), replica(7 * time.Millisecond)}
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rnd := rand.New(rand.NewPCG(seed, 0))
			phases := []api.Phase{"", api.PhasePending, api.PhaseReconciling, api.PhaseReady, api.PhaseReady, api.PhaseFailed, api.PhaseDeleting}

			var runtimes, defs []string
			for round := range 6 {
				for i := range 25 {
					e := replicas[rnd.IntN(2)]
					n := fmt.Sprintf("r%d-%d", round, i)
					switch op := rnd.IntN(10); {
					case op < 2 || len(runtimes) == 0:
						rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime(n))
						require.NoError(t, err)
						runtimes = append(runtimes, rt.ID)
					case op < 4 || len(defs) == 0:
						def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition(n))
						require.NoError(t, err)
						defs = append(defs, def.ID)
					case op < 7:
						id := runtimes[rnd.IntN(len(runtimes))]
						rt, err := e.viewer.KubernetesRuntimes().Get(ctx, id)
						require.NoError(t, err)
						_, err = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, id, 0, api.KubernetesRuntimeStatus{Status: api.Status{
							Phase: phases[rnd.IntN(len(phases))], ObservedGeneration: rt.Generation - int64(rnd.IntN(2))}})
						require.NoError(t, err)
					case op < 8:
						def, err := e.viewer.WorkloadDefinitions().Get(ctx, defs[rnd.IntN(len(defs))])
						require.NoError(t, err)
						r := int32(rnd.IntN(5) + 1)
						def.Spec.Replicas = &r
						_, err = e.dev.WorkloadDefinitions().Update(ctx, def)
						require.NoError(t, err)
					default:
						// Delete a definition: request it on one replica, finalize it on the other.
						k := rnd.IntN(len(defs))
						id := defs[k]
						defs = append(defs[:k], defs[k+1:]...)
						require.NoError(t, e.dev.WorkloadDefinitions().Delete(ctx, id, client.DeleteOptions{}))
						requireGaugesAreFullCount(ctx, t, e, "deletion requested")
						other := replicas[0]
						if other == e {
							other = replicas[1]
						}
						require.NoError(t, other.ctrl.Raw(api.KindWorkloadDefinition).Finalize(ctx, id))
					}
				}
				for i, e := range replicas {
					requireGaugesAreFullCount(ctx, t, e, fmt.Sprintf("round %d, replica %d", round, i))
				}
			}
		})
	}
}
