package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// counterValue is the value of the counter family name with the given labels in reg (0 when absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestLockAcquisitionsAreCountedByResult(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	reg := prometheus.NewRegistry()
	metrics := reconcile.NewMetrics(reg)
	def := b.createDef(t, "contended")

	// Another holder has the object's lock when the controller first gets to it.
	locker, err := b.broker.Locker(context.Background(), broker.LockConfig{TTL: time.Minute, Owner: "someone else"})
	require.NoError(t, err)
	lock, err := locker.Acquire(context.Background(), broker.LockKey("workload_definition", def.ID))
	require.NoError(t, err)

	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) { return reconcile.Result{}, nil }),
		reconcile.Config{Metrics: metrics, LockRetry: 20 * time.Millisecond, ResyncInterval: time.Hour})
	contended := map[string]string{"kind": "workload_definition", "result": "contended"}
	acquired := map[string]string{"kind": "workload_definition", "result": "acquired"}
	await.True(t, 10*time.Second, func() bool { return counterValue(t, reg, "qleet_lock_acquisitions_total", contended) >= 1 }, "a contended acquisition is counted")
	require.Zero(t, counterValue(t, reg, "qleet_lock_acquisitions_total", acquired))

	require.NoError(t, lock.Release(context.Background()))
	_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 20*time.Second), def.ID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, counterValue(t, reg, "qleet_lock_acquisitions_total", acquired), 1.0, "the acquisition that won is counted")
	require.Zero(t, counterValue(t, reg, "qleet_lock_acquisitions_total", map[string]string{"result": "error"}))
}

// histogramCount is the summed sample count of the histogram family name for kind in reg.
func histogramCount(t *testing.T, reg *prometheus.Registry, name, kind string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var n uint64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "kind" && lp.GetValue() == kind {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

func TestFinishedCountsWhatTheDurationHistogramCounts(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	reg := prometheus.NewRegistry()
	metrics := reconcile.NewMetrics(reg)
	require.Zero(t, metrics.Finished("workload_definition"))
	var nilMetrics *reconcile.Metrics
	require.Zero(t, nilMetrics.Finished("workload_definition"), "a nil Metrics counts nothing")

	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) { return reconcile.Result{}, nil }),
		reconcile.Config{Metrics: metrics, ResyncInterval: time.Hour})
	for _, name := range []string{"a", "b", "c"} {
		def := b.createDef(t, name)
		_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 20*time.Second), def.ID)
		require.NoError(t, err)
	}
	await.True(t, 10*time.Second, func() bool {
		n := metrics.Finished("workload_definition")
		return n >= 3 && uint64(n) == histogramCount(t, reg, "qleet_reconcile_duration_seconds", "workload_definition")
	}, "three finished reconciles, each in the duration histogram")
	require.Zero(t, metrics.Finished("workload_instance"), "counted per kind")
}
