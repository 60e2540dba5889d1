package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// TestExampleRuns runs the example against a real API server. A controller-role client plays the
// controller: it reports the definition reconciled and records an event, which the example then prints.
func TestExampleRuns(t *testing.T) {
	srv := apitest.Start(t)
	dev, ctrl := srv.Client(t, server.RoleDeveloper), srv.Client(t, server.RoleController)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, dev, &out) }()

	var def *api.WorkloadDefinition
	await.NoError(t, 30*time.Second, func(ctx context.Context) (err error) {
		def, err = ctrl.WorkloadDefinitions().GetByName(ctx, "hello")
		return err
	})
	require.NoError(t, ctrl.WorkloadDefinitions().RecordEvent(ctx, def.ID, api.Event{Type: api.EventNormal, Reason: "Rendered", Message: "one Deployment"}))
	st := def.Status
	st.Phase, st.ObservedGeneration = api.PhaseReady, def.Generation
	_, err := ctrl.WorkloadDefinitions().UpdateStatus(ctx, def.ID, def.ResourceVersion, st)
	require.NoError(t, err)

	require.NoError(t, <-done)
	require.Contains(t, out.String(), `workload_definition "hello" is `)
	require.Contains(t, out.String(), "reconciled: Ready")
	require.Contains(t, out.String(), "Normal Rendered: one Deployment (x1)")
}
