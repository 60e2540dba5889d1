package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// TestPlanIsThePlansAPI: `qleet plan` answers exactly what POST /v1/plans does for the same changes.
func TestPlanIsThePlansAPI(t *testing.T) {
	t.Parallel()
	_, cl, def, env := cliServer(t)
	ctx := context.Background()
	_, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}}})
	require.NoError(t, err)
	req := api.PlanRequest{Changes: []api.PlanChange{
		{Op: api.PlanCreate, Kind: api.KindWorkloadInstance, ID: "new-hello", Name: "hello",
			Spec: json.RawMessage(`{"definition_id": "` + def.ID + `", "placement": {"regions": ["eu-west", "us-east", "ap-south"]}}`)},
		{Op: api.PlanCreate, Kind: api.KindGateway, Name: "hello", Spec: json.RawMessage(`{"instance_id": "new-hello", "hosts": ["hello.example.test"]}`)},
		{Op: api.PlanUpdate, Kind: api.KindWorkloadDefinition, Name: "web", Spec: json.RawMessage(`{"containers": [{"name": "web", "image": "nginx:1.28"}]}`)},
	}}
	file := filepath.Join(t.TempDir(), "plan.json")
	data, err := json.Marshal(req)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, data, 0o600))

	want, err := cl.Plan(ctx, req)
	require.NoError(t, err)
	r := qleetIn(ctx, env, "plan", "-f", file, "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var got api.PlanResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, want.Actions, got.Actions)
	require.Equal(t, want.Warnings, got.Warnings)
	require.NotEmpty(t, want.Warnings, "ap-south is served by nothing")
	require.Equal(t, want.Summary(), got.Summary())

	r = qleetIn(ctx, env, "plan", "-f", file)
	require.Equal(t, 0, r.code, r.stderr)
	for _, line := range want.Summary() {
		require.Contains(t, r.stdout, "  "+line+"\n")
	}
}

// TestDeleteSaysWhatStays: `qleet delete` of a database with retain says that its data stays.
func TestDeleteSaysWhatStays(t *testing.T) {
	t.Parallel()
	_, cl, _, env := cliServer(t)
	ctx := context.Background()
	for _, retain := range []bool{true, false} {
		name := map[bool]string{true: "kept", false: "gone"}[retain]
		_, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: name}, Spec: api.DatabaseSpec{Retain: retain}})
		require.NoError(t, err)
		r := qleetIn(ctx, env, "delete", "database", name)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, `database "`+name+`" deletion requested`)
		if retain {
			require.Contains(t, r.stdout, "What stays after it:\n  database \"kept\": deleted with retain: its volume and credentials stay")
		} else {
			require.NotContains(t, r.stdout, "What stays after it")
		}
	}
}
