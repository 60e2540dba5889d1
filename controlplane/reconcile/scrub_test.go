package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// TestNoCredentialLeavesAReconcile: whatever a reconciler puts in its status, conditions, events or
// errors, a URL's userinfo never reaches what viewers read.
func TestNoCredentialLeavesAReconcile(t *testing.T) {
	t.Parallel()
	const pass = "pw-7f3c1d"
	server := "https://admin:" + pass + "@10.1.2.3:6443"
	b := setup(t, setupOpts{})
	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		reconcile.Eventf(ctx, api.EventNormal, "Connecting", "connecting to %s", server)
		obj.Status.SetCondition(api.Condition{Type: "Connected", Status: api.ConditionTrue, Reason: "Reachable", Message: "at " + server})
		switch obj.Name {
		case "retryable":
			return reconcile.Result{}, fmt.Errorf("cannot reach the Kubernetes API at %s: %w", server, errors.New(`Get "https://tok-`+pass+`@h/version": EOF`))
		case "terminal":
			return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("the Kubernetes API at %s refuses this runtime", server))
		case "requeue":
			obj.Status.Message = "waiting on " + server
			return reconcile.Result{RequeueAfter: time.Hour}, nil
		case "stalled":
			return reconcile.Result{RequeueAfter: time.Hour, Stalled: &reconcile.Stall{Reason: "Unreachable", Message: "no answer from " + server}}, nil
		}
		return reconcile.Result{}, nil
	}), reconcile.Config{BackoffBase: time.Hour, ResyncInterval: time.Hour})

	for _, tc := range []struct {
		name  string
		phase api.Phase
		want  string // in the status message or the events
	}{
		{"retryable", api.PhaseReconciling, "cannot reach the Kubernetes API at https://admin:xxxxx@10.1.2.3:6443: Get \"https://xxxxx@h/version\": EOF"},
		{"terminal", api.PhaseFailed, "the Kubernetes API at https://admin:xxxxx@10.1.2.3:6443 refuses this runtime"},
		{"requeue", api.PhaseReconciling, "waiting on https://admin:xxxxx@10.1.2.3:6443"},
		{"stalled", api.PhaseReconciling, "no answer from https://admin:xxxxx@10.1.2.3:6443"},
		{"done", api.PhaseReady, "connecting to https://admin:xxxxx@10.1.2.3:6443"},
	} {
		t.Run("a "+tc.name+" outcome shows the URL without its password", func(t *testing.T) {
			obj := b.createDef(t, tc.name)
			var got *defObj
			await.True(t, 20*time.Second, func() bool {
				var err error
				got, err = b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
				require.NoError(t, err)
				return got.Status.Phase == tc.phase && got.Status.ObservedGeneration == got.Generation
			}, "the outcome written at the current generation")
			evs, err := b.client.WorkloadDefinitions().Events(context.Background(), obj.ID)
			require.NoError(t, err)
			status, err := json.Marshal(got.Status)
			require.NoError(t, err)
			events, err := json.Marshal(evs)
			require.NoError(t, err)
			require.NotContains(t, string(status), pass)
			require.NotContains(t, string(events), pass)
			require.Contains(t, string(status)+string(events), strings.ReplaceAll(tc.want, `"`, `\"`))
			require.Contains(t, string(status), "at https://admin:xxxxx@10.1.2.3:6443", "the reconciler's own condition")
		})
	}
}
