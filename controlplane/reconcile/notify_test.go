package reconcile_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// TestNotifyComesAfterTheStatusWrite: a reconcile's Result.Notify reaches the object it names once the
// status that object reads is written. Nothing else would reconcile it again: it references nothing,
// and the resync is an hour away.
func TestNotifyComesAfterTheStatusWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var readerID atomic.Value
	var readerCalls atomic.Int32
	var seen atomic.Int64 // the writer's status.instances, as the reader's last reconcile read it
	seen.Store(-1)
	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		switch obj.Name {
		case "reader":
			readerCalls.Add(1)
			w, err := b.client.WorkloadDefinitions().GetByName(ctx, "writer")
			if api.IsNotFound(err) {
				return reconcile.Result{}, nil
			}
			if err != nil {
				return reconcile.Result{}, err
			}
			seen.Store(int64(w.Status.Instances))
		case "writer":
			obj.Status.Instances = 7
			return reconcile.Result{Notify: []api.ObjectRef{{Kind: api.KindWorkloadDefinition, ID: readerID.Load().(string), Name: "reader"}}}, nil
		}
		return reconcile.Result{}, nil
	}), reconcile.Config{ResyncInterval: time.Hour})

	reader := b.createDef(t, "reader")
	readerID.Store(reader.ID)
	_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), reader.ID)
	require.NoError(t, err)
	before := settled(&readerCalls)

	writer := b.createDef(t, "writer")
	_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), writer.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return readerCalls.Load() > before }, 5*time.Second, 20*time.Millisecond, "the reader is notified")
	require.EqualValues(t, 7, seen.Load(), "the notified reconcile reads the status the notifying one wrote")
}
