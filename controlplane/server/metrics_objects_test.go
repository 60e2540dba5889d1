package server_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// scrape returns the /metrics exposition.
func (e *env) scrape(t testing.TB) string {
	t.Helper()
	code, body := e.raw(t, "", http.MethodGet, "/metrics", "", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	return string(body)
}

// sample returns the value of the sample with exactly this name and label text (labels sorted by name,
// as the exposition writes them), failing when there is none.
func sample(t testing.TB, exposition, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(exposition)
	require.NotNil(t, m, "no sample %s in\n%s", series, exposition)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

func TestObjectMetricsAreReadFromTheStoreAtScrapeTime(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(testing.TB) store.Store{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testObjectMetrics(t, setup(t, setupOpts{st: open(t)}))
		})
	}
}

func testObjectMetrics(t *testing.T, e *env) {
	ctx := context.Background()
	connected := func(s api.ConditionStatus) []api.Condition {
		return []api.Condition{{Type: "Connected", Status: s, LastTransitionTime: time.Now().UTC()}}
	}
	east, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("east"))
	require.NoError(t, err)
	_, err = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, east.ID, 0, api.KubernetesRuntimeStatus{Region: "us-east-1",
		Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: east.Generation, Conditions: connected(api.ConditionTrue)}})
	require.NoError(t, err)
	west := localRuntime("west")
	west.Spec.Region = "eu-west"
	west, err = e.dev.KubernetesRuntimes().Create(ctx, west)
	require.NoError(t, err)
	_, err = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, west.ID, 0, api.KubernetesRuntimeStatus{
		Status: api.Status{Phase: api.PhaseReconciling, ObservedGeneration: west.Generation, Conditions: connected(api.ConditionFalse)}})
	require.NoError(t, err)
	fresh, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("fresh"))
	require.NoError(t, err)

	svc, err := e.admin.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "ingress-east"},
		Spec: api.SupportServiceSpec{RuntimeID: east.ID, Type: api.SupportIngress}})
	require.NoError(t, err)
	_, err = e.ctrl.SupportServices().UpdateStatus(ctx, svc.ID, 0, api.SupportServiceStatus{
		Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: svc.Generation}})
	require.NoError(t, err)
	_, err = e.admin.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "ingress-west"},
		Spec: api.SupportServiceSpec{RuntimeID: west.ID, Type: api.SupportIngress}})
	require.NoError(t, err)

	beforeDef := time.Now()
	_, err = e.dev.WorkloadDefinitions().Create(ctx, webDefinition("web"))
	require.NoError(t, err)

	text := e.scrape(t)
	sinceDef := time.Since(beforeDef).Seconds()

	t.Run("objects by kind and phase, with 0 for empty phases and kinds", func(t *testing.T) {
		for series, want := range map[string]float64{
			`qleet_objects{kind="kubernetes_runtime",phase="Ready"}`:       1,
			`qleet_objects{kind="kubernetes_runtime",phase="Reconciling"}`: 1,
			`qleet_objects{kind="kubernetes_runtime",phase="Pending"}`:     1, // no status yet
			`qleet_objects{kind="kubernetes_runtime",phase="Failed"}`:      0,
			`qleet_objects{kind="support_service",phase="Ready"}`:          1,
			`qleet_objects{kind="support_service",phase="Pending"}`:        1,
			`qleet_objects{kind="workload_definition",phase="Pending"}`:    1,
			`qleet_objects{kind="bucket",phase="Ready"}`:                   0,
			`qleet_objects_unreconciled{kind="kubernetes_runtime"}`:        2,
			`qleet_objects_unreconciled{kind="support_service"}`:           1,
			`qleet_objects_unreconciled{kind="bucket"}`:                    0,
		} {
			require.Equal(t, want, sample(t, text, series), series)
		}
	})

	t.Run("oldest unreconciled age counts from the last write, 0 when all are reconciled", func(t *testing.T) {
		age := sample(t, text, `qleet_oldest_unreconciled_age_seconds{kind="workload_definition"}`)
		require.Greater(t, age, 0.0)
		require.LessOrEqual(t, age, sinceDef)
		require.Zero(t, sample(t, text, `qleet_oldest_unreconciled_age_seconds{kind="bucket"}`))
		require.Greater(t, sample(t, text, `qleet_oldest_unreconciled_age_seconds{kind="kubernetes_runtime"}`), age,
			"the runtimes were written before the definition")
	})

	t.Run("runtime reachability follows the Connected condition", func(t *testing.T) {
		require.Equal(t, 1.0, sample(t, text, `qleet_runtime_reachable{name="east",region="us-east-1",runtime="`+east.ID+`"}`),
			"the region the runtime reports wins over its spec's")
		require.Equal(t, 0.0, sample(t, text, `qleet_runtime_reachable{name="west",region="eu-west",runtime="`+west.ID+`"}`))
		require.Equal(t, 0.0, sample(t, text, `qleet_runtime_reachable{name="fresh",region="us-east",runtime="`+fresh.ID+`"}`),
			"a runtime not checked yet is not reachable")
	})

	t.Run("support services by runtime, type and phase", func(t *testing.T) {
		require.Equal(t, 1.0, sample(t, text, `qleet_support_services{phase="Ready",runtime="`+east.ID+`",type="ingress"}`))
		require.Equal(t, 1.0, sample(t, text, `qleet_support_services{phase="Pending",runtime="`+west.ID+`",type="ingress"}`))
	})

	t.Run("a reconciled kind's age drops to 0", func(t *testing.T) {
		rts, err := e.viewer.KubernetesRuntimes().List(ctx, client.ListOptions{})
		require.NoError(t, err)
		for _, rt := range rts.Items {
			_, err := e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{
				Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: rt.Generation, Conditions: connected(api.ConditionTrue)}})
			require.NoError(t, err)
		}
		text := e.scrape(t)
		require.Zero(t, sample(t, text, `qleet_oldest_unreconciled_age_seconds{kind="kubernetes_runtime"}`))
		require.Zero(t, sample(t, text, `qleet_objects_unreconciled{kind="kubernetes_runtime"}`))
		require.Equal(t, 3.0, sample(t, text, `qleet_objects{kind="kubernetes_runtime",phase="Ready"}`))
		require.Equal(t, 1.0, sample(t, text, `qleet_runtime_reachable{name="fresh",region="us-east",runtime="`+fresh.ID+`"}`))
	})

	t.Run("deletion requested is not reconciled", func(t *testing.T) {
		require.NoError(t, e.dev.KubernetesRuntimes().Delete(ctx, fresh.ID, client.DeleteOptions{}))
		text := e.scrape(t)
		require.Equal(t, 1.0, sample(t, text, `qleet_objects_unreconciled{kind="kubernetes_runtime"}`))
		require.Greater(t, sample(t, text, `qleet_oldest_unreconciled_age_seconds{kind="kubernetes_runtime"}`), 0.0)
	})
}
