package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
)

// refused sends a write and checks that it answers 400 naming the field, with the message containing msg.
func (e *env) refused(t *testing.T, role, method, path, body, field, msg string) {
	t.Helper()
	code, data := e.raw(t, role, method, path, body, nil)
	require.Equal(t, http.StatusBadRequest, code, string(data))
	ae := apiErr(t, data)
	require.Equal(t, api.CodeInvalid, ae.Code)
	require.Equal(t, field, ae.Field, ae.Message)
	require.Contains(t, ae.Message, msg)
}

// unchanged checks that an object still has the generation and resource version it had.
func (e *env) unchanged(t *testing.T, kind string, before *api.RawObject) {
	t.Helper()
	after, err := e.admin.Raw(kind).Get(context.Background(), before.ID)
	require.NoError(t, err)
	require.Equal(t, before.Generation, after.Generation, "nothing was written")
	require.Equal(t, before.ResourceVersion, after.ResourceVersion, "nothing was written")
}

func TestUsesCycles(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rt, def, _ := e.world(t, "cy")
	newInst := func(name string, uses ...string) *api.WorkloadInstance {
		spec := api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}
		for _, u := range uses {
			spec.Uses = append(spec.Uses, api.Use{InstanceID: u, EnvPrefix: "USED_" + strings.ToUpper(u[len(u)-4:])})
		}
		inst, err := e.dev.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: name}, Spec: spec})
		require.NoError(t, err)
		return inst
	}
	a := newInst("a")
	b := newInst("b", a.ID)
	c := newInst("c", b.ID)
	put := func(inst *api.WorkloadInstance, uses ...string) string {
		var us []string
		for _, u := range uses {
			us = append(us, fmt.Sprintf(`{"instance_id":%q,"env_prefix":"U%d"}`, u, len(us)))
		}
		return fmt.Sprintf(`{"name":%q,"spec":{"definition_id":%q,"runtime_id":%q,"uses":[%s]}}`, inst.Name, def.ID, rt.ID, strings.Join(us, ","))
	}
	before := func(id string) *api.RawObject {
		o, err := e.admin.Raw(api.KindWorkloadInstance).Get(ctx, id)
		require.NoError(t, err)
		return o
	}

	t.Run("a self-reference is a 400 naming the field, not a 500", func(t *testing.T) {
		o := before(a.ID)
		e.refused(t, server.RoleDeveloper, http.MethodPut, "/v1/workload_instances/"+a.ID, put(a, a.ID), "spec.uses[0].instance_id", "must not name the workload_instance itself")
		e.unchanged(t, api.KindWorkloadInstance, o)
	})
	t.Run("a cycle of two is refused with its path", func(t *testing.T) {
		o := before(a.ID)
		e.refused(t, server.RoleDeveloper, http.MethodPut, "/v1/workload_instances/"+a.ID, put(a, b.ID), "spec.uses[0].instance_id", "makes a cycle of uses: a → b → a")
		e.unchanged(t, api.KindWorkloadInstance, o)
	})
	t.Run("a longer cycle is refused with its path, naming the use that closes it", func(t *testing.T) {
		o := before(a.ID)
		e.refused(t, server.RoleDeveloper, http.MethodPut, "/v1/workload_instances/"+a.ID, put(a, c.ID), "spec.uses[0].instance_id", "a → c → b → a")
		code, data := e.raw(t, server.RoleDeveloper, http.MethodPatch, "/v1/workload_instances/"+a.ID,
			fmt.Sprintf(`{"spec":{"uses":[{"instance_id":%q,"env_prefix":"C"}]}}`, c.ID), http.Header{"Content-Type": {"application/merge-patch+json"}})
		require.Equal(t, http.StatusBadRequest, code, "PATCH too: %s", data)
		require.Equal(t, "spec.uses[0].instance_id", apiErr(t, data).Field)
		e.unchanged(t, api.KindWorkloadInstance, o)
	})
	t.Run("a plan that would close a cycle fails the same way", func(t *testing.T) {
		spec, err := json.Marshal(api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID, Uses: []api.Use{{InstanceID: c.ID, EnvPrefix: "C"}}})
		require.NoError(t, err)
		_, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanUpdate, Kind: api.KindWorkloadInstance, ID: a.ID, Spec: spec}}})
		require.True(t, api.IsInvalid(err), "%v", err)
		require.Contains(t, err.Error(), "a → c → b → a")
	})
	t.Run("shared uses without a cycle pass", func(t *testing.T) {
		d := newInst("d", b.ID, c.ID) // d → b → a and d → c → b: a diamond, no cycle
		_, err := e.dev.WorkloadInstances().Get(ctx, d.ID)
		require.NoError(t, err)
	})
}

func TestDatabaseVersions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i, tc := range []struct{ engine, version, msg string }{
		{"postgres", "9", "postgres 9 is not supported; supported versions: 13, 14, 15, 16, 17"},
		{"postgres", "99", "postgres 99 is not supported"},
		{"postgres", "12.19", "postgres 12.19 is not supported"},
		{"mysql", "16", "mysql 16 is not supported; supported versions: 8.0, 8.4"},
		{"mysql", "8", "mysql 8 is not supported"},
		{"mysql", "5.7", "mysql 5.7 is not supported"},
	} {
		t.Run(tc.engine+" "+tc.version+" is refused, listing the supported ones", func(t *testing.T) {
			name := fmt.Sprintf("db-bad-%d", i)
			e.refused(t, server.RoleDeveloper, http.MethodPost, "/v1/databases",
				fmt.Sprintf(`{"name":%q,"spec":{"engine":%q,"version":%q}}`, name, tc.engine, tc.version), "spec.version", tc.msg)
			_, err := e.admin.Databases().GetByName(context.Background(), name)
			require.True(t, api.IsNotFound(err), "nothing was written")
		})
	}
	t.Run("every version each provider serves, and releases of them, pass", func(t *testing.T) {
		n := 0
		for _, engine := range []string{api.EnginePostgres, api.EngineMySQL} {
			for _, p := range []string{api.DatabaseProviderInCluster, api.DatabaseProviderRDS} {
				for _, v := range append(api.DatabaseVersions(engine, p), api.DatabaseVersions(engine, p)[0]+".3") {
					n++
					_, err := e.dev.Databases().Create(context.Background(), &api.Database{Meta: api.Meta{Name: fmt.Sprintf("db-ok-%d", n)},
						Spec: api.DatabaseSpec{Engine: engine, Version: v}})
					require.NoError(t, err, "%s %s", engine, v)
				}
			}
		}
	})
}

func TestReplicaLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, setupOpts{cfg: func(c *server.Config) { c.MaxReplicasPerRole = map[string]int32{server.RoleDeveloper: 50} }})
	ctx := context.Background()
	rt, def, inst := e.world(t, "rl")
	containers := `"containers":[{"name":"web","image":"nginx:1.27"}]`

	t.Run("the API's bound holds for every role", func(t *testing.T) {
		for _, tc := range []struct{ kind, spec, field string }{
			{"workload_definitions", `{` + containers + `,"replicas":2147483647}`, "spec.replicas"},
			{"workload_definitions", `{` + containers + `,"autoscaling":{"min_replicas":1,"max_replicas":1001}}`, "spec.autoscaling.max_replicas"},
			{"workload_instances", fmt.Sprintf(`{"definition_id":%q,"runtime_id":%q,"replicas":2147483647}`, def.ID, rt.ID), "spec.replicas"},
		} {
			e.refused(t, server.RoleAdmin, http.MethodPost, "/v1/"+tc.kind, `{"name":"rl-huge","spec":`+tc.spec+`}`, tc.field, "must be at most 1000")
			_, err := e.admin.Raw(strings.TrimSuffix(tc.kind, "s")).GetByName(ctx, "rl-huge")
			require.True(t, api.IsNotFound(err), "nothing was written")
		}
	})
	t.Run("a role's limit holds for its tokens, on create and update", func(t *testing.T) {
		e.refused(t, server.RoleDeveloper, http.MethodPost, "/v1/workload_definitions", `{"name":"rl-dev","spec":{`+containers+`,"replicas":51}}`,
			"spec.replicas", "must be at most 50 for a developer token")
		e.refused(t, server.RoleDeveloper, http.MethodPost, "/v1/workload_definitions", `{"name":"rl-dev","spec":{`+containers+`,"autoscaling":{"min_replicas":1,"max_replicas":60}}}`,
			"spec.autoscaling.max_replicas", "must be at most 50 for a developer token")
		_, err := e.admin.WorkloadDefinitions().GetByName(ctx, "rl-dev")
		require.True(t, api.IsNotFound(err), "nothing was written")
		before, err := e.admin.Raw(api.KindWorkloadInstance).Get(ctx, inst.ID)
		require.NoError(t, err)
		e.refused(t, server.RoleDeveloper, http.MethodPut, "/v1/workload_instances/"+inst.ID,
			fmt.Sprintf(`{"name":%q,"spec":{"definition_id":%q,"runtime_id":%q,"replicas":51}}`, inst.Name, def.ID, rt.ID), "spec.replicas", "at most 50")
		e.unchanged(t, api.KindWorkloadInstance, before)
		fifty := int32(50)
		inst.Spec.Replicas = &fifty
		_, err = e.dev.WorkloadInstances().Update(ctx, inst)
		require.NoError(t, err, "the limit itself is allowed")
	})
	t.Run("other roles are held only to the API's bound", func(t *testing.T) {
		code, data := e.raw(t, server.RoleAdmin, http.MethodPost, "/v1/workload_definitions", `{"name":"rl-admin","spec":{`+containers+`,"replicas":1000}}`, nil)
		require.Equal(t, http.StatusCreated, code, string(data))
	})
	t.Run("a limit for an unknown role, or beyond the API's bound, does not start", func(t *testing.T) {
		for _, m := range []map[string]int32{{"intern": 5}, {server.RoleDeveloper: 1001}, {server.RoleDeveloper: -1}} {
			_, err := server.New(server.Config{Store: e.store, MaxReplicasPerRole: m})
			require.Error(t, err, "%v", m)
		}
	})
}

func TestLocalChartPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := setup(t, setupOpts{cfg: func(c *server.Config) { c.ChartDir = dir }})
	for i, chart := range []string{"..", "../etc", "a/../../etc", filepath.Join(filepath.Dir(dir), "other"), "/etc/passwd"} {
		t.Run(fmt.Sprintf("%q is refused at write time", chart), func(t *testing.T) {
			name := fmt.Sprintf("chart-bad-%d", i)
			e.refused(t, server.RoleDeveloper, http.MethodPost, "/v1/workload_definitions",
				fmt.Sprintf(`{"name":%q,"spec":{"helm":{"chart":%q}}}`, name, chart), "spec.helm.chart", "chart directory")
			_, err := e.admin.WorkloadDefinitions().GetByName(context.Background(), name)
			require.True(t, api.IsNotFound(err), "nothing was written")
		})
	}
	for i, chart := range []string{"demo", "team/demo-1.0.0.tgz", "a/../demo", filepath.Join(dir, "demo")} {
		t.Run(fmt.Sprintf("%q inside the chart directory passes", chart), func(t *testing.T) {
			_, err := e.dev.WorkloadDefinitions().Create(context.Background(), &api.WorkloadDefinition{Meta: api.Meta{Name: fmt.Sprintf("chart-ok-%d", i)},
				Spec: api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Chart: chart}}})
			require.NoError(t, err)
		})
	}
	t.Run("a chart from a repository is a name, not a path", func(t *testing.T) {
		_, err := e.dev.WorkloadDefinitions().Create(context.Background(), &api.WorkloadDefinition{Meta: api.Meta{Name: "chart-repo"},
			Spec: api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Repository: "https://charts.example.com", Chart: "nginx"}}})
		require.NoError(t, err)
	})
}

func TestDataServicesAttachedByInstanceID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	_, _, inst := e.world(t, "att")
	db, err := e.dev.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "att-db"}, Spec: api.DatabaseSpec{InstanceID: inst.ID}})
	require.NoError(t, err)
	bucket, err := e.dev.Buckets().Create(ctx, &api.Bucket{Meta: api.Meta{Name: "att-bucket"}, Spec: api.BucketSpec{InstanceID: inst.ID}})
	require.NoError(t, err)

	for _, tc := range []struct{ plural, kind, id string }{{"databases", api.KindDatabase, db.ID}, {"buckets", api.KindBucket, bucket.ID}} {
		t.Run(tc.kind+" is protected from deletion while its instance uses it", func(t *testing.T) {
			code, data := e.raw(t, server.RoleDeveloper, http.MethodDelete, "/v1/"+tc.plural+"/"+tc.id, "", nil)
			require.Equal(t, http.StatusConflict, code, string(data))
			require.Equal(t, []api.ObjectRef{{Kind: api.KindWorkloadInstance, ID: inst.ID, Name: inst.Name}}, apiErr(t, data).Dependents)
			got, err := e.admin.Raw(tc.kind).Get(ctx, tc.id)
			require.NoError(t, err)
			require.Nil(t, got.DeletionRequestedAt, "nothing was written")
		})
	}
	t.Run("a plan of the delete is refused the same way, and the graph shows the use", func(t *testing.T) {
		_, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindDatabase, ID: db.ID}}})
		require.True(t, api.IsConflict(err), "%v", err)
		g, err := e.dev.Graph(ctx, "")
		require.NoError(t, err)
		require.Contains(t, g.Providers(inst.ID), api.GraphEdge{From: inst.ID, To: db.ID, Type: api.EdgeReference, Why: "database spec.instance_id"})
	})
	t.Run("an instance_id naming no instance is refused", func(t *testing.T) {
		e.refused(t, server.RoleDeveloper, http.MethodPost, "/v1/databases", `{"name":"att-none","spec":{"instance_id":"nope"}}`,
			"spec.instance_id", `workload_instance "nope" not found`)
		_, err := e.admin.Databases().GetByName(ctx, "att-none")
		require.True(t, api.IsNotFound(err), "nothing was written")
	})
	t.Run("a delete that detaches goes ahead, as Terraform's removal of the resource asks", func(t *testing.T) {
		other, err := e.dev.Buckets().Create(ctx, &api.Bucket{Meta: api.Meta{Name: "att-bucket-2"}, Spec: api.BucketSpec{InstanceID: inst.ID}})
		require.NoError(t, err)
		code, data := e.raw(t, server.RoleDeveloper, http.MethodDelete, "/v1/buckets/"+other.ID+"?detach=maybe", "", nil)
		require.Equal(t, http.StatusBadRequest, code, string(data))
		require.NoError(t, e.dev.Buckets().Delete(ctx, other.ID, client.DeleteOptions{Detach: true}))
		got, err := e.admin.Buckets().Get(ctx, other.ID)
		require.NoError(t, err)
		require.NotNil(t, got.DeletionRequestedAt)
	})
	t.Run("once the instance is gone the database stays writable and may go", func(t *testing.T) {
		require.NoError(t, e.dev.WorkloadInstances().Delete(ctx, inst.ID, client.DeleteOptions{}))
		require.NoError(t, e.ctrl.WorkloadInstances().Finalize(ctx, inst.ID))
		cur, err := e.dev.Databases().Get(ctx, db.ID)
		require.NoError(t, err)
		cur.Spec.Retain = true
		_, err = e.dev.Databases().Update(ctx, cur)
		require.NoError(t, err, "the instance it names is gone, and it still names it")
		require.NoError(t, e.dev.Databases().Delete(ctx, db.ID, client.DeleteOptions{}))
		require.NoError(t, e.dev.Buckets().Delete(ctx, bucket.ID, client.DeleteOptions{}))
	})
}

// TestPutRoundTrip GETs an object of every kind and PUTs it back as it was read: 200, with no new
// generation. Changing a read-only field instead is a 400 naming it, and writes nothing.
func TestPutRoundTrip(t *testing.T) {
	t.Parallel()
	w := newFuzzWorld(t)
	for i, ki := range w.kinds {
		path := w.paths[i]
		t.Run(ki.Kind+" goes back as it came", func(t *testing.T) {
			_, stored := w.raw(t, server.RoleController, http.MethodGet, path, "", nil) // with the write-only fields
			for _, role := range []string{server.RoleDeveloper, server.RoleAdmin} {
				code, got := w.raw(t, role, http.MethodGet, path, "", nil)
				require.Equal(t, http.StatusOK, code, string(got))
				var before api.RawObject
				require.NoError(t, json.Unmarshal(got, &before))
				code, data := w.raw(t, role, http.MethodPut, path, string(got), nil)
				require.Equal(t, http.StatusOK, code, "%s: %s", role, data)
				var after api.RawObject
				require.NoError(t, json.Unmarshal(data, &after))
				require.Equal(t, before.Generation, after.Generation, "%s: no spec change, no new generation", role)
			}
			_, now := w.raw(t, server.RoleController, http.MethodGet, path, "", nil)
			var was, is api.RawObject
			require.NoError(t, json.Unmarshal(stored, &was))
			require.NoError(t, json.Unmarshal(now, &is))
			require.JSONEq(t, string(was.Spec), string(is.Spec), "write-only fields that GET hid keep their stored values")
		})
		t.Run(ki.Kind+" refuses a changed read-only field", func(t *testing.T) {
			_, got := w.raw(t, server.RoleDeveloper, http.MethodGet, path, "", nil)
			var before api.RawObject
			require.NoError(t, json.Unmarshal(got, &before))
			for field, value := range map[string]any{
				"id": "other", "kind": "other", "generation": before.Generation + 1, "created_at": "2001-01-01T00:00:00Z",
				"updated_at": "2001-01-01T00:00:00Z", "deletion_requested_at": "2001-01-01T00:00:00Z", "deletion_orphan": true,
				"status": map[string]any{"phase": "Ready", "observed_generation": before.Generation},
			} {
				var body map[string]any
				require.NoError(t, json.Unmarshal(got, &body))
				body[field] = value
				data, err := json.Marshal(body)
				require.NoError(t, err)
				w.refused(t, server.RoleDeveloper, http.MethodPut, path, string(data), field, "")
				w.unchanged(t, ki.Kind, &before)
			}
			var body map[string]any
			require.NoError(t, json.Unmarshal(got, &body))
			body["resource_version"] = before.ResourceVersion - 1
			data, err := json.Marshal(body)
			require.NoError(t, err)
			code, resp := w.raw(t, server.RoleDeveloper, http.MethodPut, path, string(data), nil)
			require.Equal(t, http.StatusConflict, code, "a stale resource_version is a precondition that fails: %s", resp)
			w.unchanged(t, ki.Kind, &before)
		})
	}
}
