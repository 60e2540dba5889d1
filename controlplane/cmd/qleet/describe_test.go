package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from what the tests print")

// The write-only values of the test's runtime and secret: no describe output may hold them.
const (
	kubeconfigMarker = "describe-kubeconfig-token-5b1e"
	secretMarker     = "describe-secret-value-91c4"
)

// describeFixture is a control plane with the API and no controllers, holding objects whose status and
// events the test wrote itself, so that describe prints the same thing on every run.
type describeFixture struct {
	endpoint, adminToken string
	cl                   *client.Client
	// ids maps each id the server assigned to a fixed one of the same length, in creation order.
	ids map[string]string
}

// base is the fixed time the test's timestamps are counted from; describe's "now" is an hour and a half later.
var base = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return base.Add(time.Duration(minutes) * time.Minute) }

func startDescribeFixture(t *testing.T) *describeFixture {
	t.Helper()
	cfg := cptest.Config()
	cfg.API = true // no controllers: every status and event below is the test's
	a, cl := cptest.Start(t, cfg)
	ctx := cptest.Wait(t, time.Minute)
	f := &describeFixture{endpoint: a.Endpoint, adminToken: a.AdminToken, cl: cl, ids: map[string]string{}}
	fix := func(id string) { f.ids[id] = fmt.Sprintf("00000000-0000-7000-8000-%012d", len(f.ids)+1) }
	event := func(kind, id string, e api.Event, times int) {
		t.Helper()
		for range times {
			require.NoError(t, cl.Raw(kind).RecordEvent(ctx, id, e))
		}
	}
	kubeconfig := func(server string) string {
		return "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + server + "\"}}]\n" +
			"users: [{name: u, user: {token: " + kubeconfigMarker + "}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	}

	// Two runtimes: eu-west is Ready, us-east cannot be reached.
	eu, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "eu-west", Labels: map[string]string{"tier": "prod", "region": "eu-west"}},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Region: "eu-west", Kubeconfig: kubeconfig("https://eu-west.example:6443")}})
	require.NoError(t, err)
	fix(eu.ID)
	_, err = cl.KubernetesRuntimes().UpdateStatus(ctx, eu.ID, eu.ResourceVersion, api.KubernetesRuntimeStatus{
		Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: eu.Generation, LastReconciledAt: new(at(50)),
			Conditions: []api.Condition{
				{Type: "Connected", Status: api.ConditionTrue, Reason: "Connected", Message: "API server answers", LastTransitionTime: at(2)},
				{Type: "Ready", Status: api.ConditionTrue, Reason: "NodesReady", Message: "3 of 3 nodes Ready", LastTransitionTime: at(3)},
			}},
		Endpoint: "https://eu-west.example:6443", Version: "v1.31.4", NodesReady: 3, NodesTotal: 3, Region: "eu-west", Placements: 1,
		Data: []api.RuntimeData{{Kind: api.KindDatabase, Name: "db", Namespace: "web", Volumes: []string{"data-db-0 (5Gi)"}}},
	})
	require.NoError(t, err)
	event(api.KindKubernetesRuntime, eu.ID, api.Event{Type: api.EventNormal, Reason: "Connected", Message: "connected to https://eu-west.example:6443: v1.31.4, 3 of 3 nodes Ready"}, 1)

	us, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "us-east"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Region: "us-east", Kubeconfig: kubeconfig("https://127.0.0.1:1")}})
	require.NoError(t, err)
	fix(us.ID)
	_, err = cl.KubernetesRuntimes().UpdateStatus(ctx, us.ID, us.ResourceVersion, api.KubernetesRuntimeStatus{
		Status: api.Status{Phase: api.PhaseReconciling, ObservedGeneration: us.Generation,
			Message: "cannot reach the Kubernetes API at https://127.0.0.1:1: connection refused",
			Conditions: []api.Condition{{Type: "Connected", Status: api.ConditionFalse, Reason: "Unreachable",
				Message: "dial tcp 127.0.0.1:1: connect: connection refused", LastTransitionTime: at(4)}}},
	})
	require.NoError(t, err)

	// A definition of containers, Ready.
	replicas := int32(2)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web", Labels: map[string]string{"app": "quickstart"}},
		Spec: api.WorkloadDefinitionSpec{Replicas: &replicas, Autoscaling: &api.Autoscaling{MinReplicas: 2, MaxReplicas: 5, TargetCPUPercent: 70},
			Containers: []api.Container{{
				Name: "web", Image: "nginx:1.27", Command: []string{"nginx", "-g", "daemon off;"},
				Ports:          []api.ContainerPort{{Name: "http", ContainerPort: 80}},
				Env:            []api.EnvVar{{Name: "GREETING", Value: "hello"}},
				Resources:      &api.Resources{Requests: api.ResourceList{CPU: "100m", Memory: "64Mi"}, Limits: api.ResourceList{Memory: "128Mi"}},
				ReadinessProbe: &api.Probe{HTTPGetPath: "/", Port: 80, PeriodSeconds: 5},
			}}}})
	require.NoError(t, err)
	fix(def.ID)
	_, err = cl.WorkloadDefinitions().UpdateStatus(ctx, def.ID, def.ResourceVersion, api.WorkloadDefinitionStatus{
		Status:    api.Status{Phase: api.PhaseReady, ObservedGeneration: def.Generation, Conditions: []api.Condition{{Type: "Ready", Status: api.ConditionTrue, Reason: "Valid", LastTransitionTime: at(5)}}},
		Instances: 1,
	})
	require.NoError(t, err)

	// An instance placed in both regions: Ready in eu-west, waiting on us-east.
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web", Labels: map[string]string{"app": "quickstart"}},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}},
			Env: []api.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}, Images: map[string]string{"web": "nginx:1.27.3"}}})
	require.NoError(t, err)
	fix(inst.ID)
	deploy := func(runtime string, ready bool, msg string) api.AppliedObject {
		return api.AppliedObject{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "web", Ready: ready, Message: msg, Runtime: runtime}
	}
	service := api.AppliedObject{APIVersion: "v1", Kind: "Service", Namespace: "web", Name: "web", Ready: true, Runtime: "eu-west"}
	waiting := `kubernetes_runtime "us-east" is not Ready`
	_, err = cl.WorkloadInstances().UpdateStatus(ctx, inst.ID, inst.ResourceVersion, api.WorkloadInstanceStatus{
		Status: api.Status{Phase: api.PhaseReconciling, ObservedGeneration: inst.Generation, LastReconciledAt: new(at(45)),
			Message: "1 of 2 placements Ready: " + waiting,
			Conditions: []api.Condition{
				{Type: "Ready", Status: api.ConditionFalse, Reason: "Placing", Message: waiting, WaitingOn: `kubernetes_runtime "us-east"`, LastTransitionTime: at(40)},
				{Type: "DependenciesReady", Status: api.ConditionTrue, Reason: "Ready", LastTransitionTime: at(30)},
			}},
		Namespace: "web", DefinitionGeneration: def.Generation, Replicas: 4, ReadyReplicas: 2, AvailableReplicas: 2,
		Objects: []api.AppliedObject{deploy("eu-west", true, ""), service, deploy("us-east", false, "waiting for the runtime")},
		Placements: []api.PlacementStatus{
			{RuntimeID: eu.ID, Runtime: "eu-west", Region: "eu-west", Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, Phase: api.PhaseReady,
				Objects: []api.AppliedObject{deploy("", true, ""), service}},
			{RuntimeID: us.ID, Runtime: "us-east", Region: "us-east", Replicas: 2, Phase: api.PhasePending, Message: waiting,
				Objects: []api.AppliedObject{deploy("", false, "waiting for the runtime")}},
		},
	})
	require.NoError(t, err)
	event(api.KindWorkloadInstance, inst.ID, api.Event{Type: api.EventNormal, Reason: "Placed", Message: `placed on kubernetes_runtime "eu-west" and "us-east"`}, 1)
	event(api.KindWorkloadInstance, inst.ID, api.Event{Type: api.EventNormal, Reason: "RolledOut", Message: "eu-west: 2 of 2 replicas ready", DurationMS: 840}, 1)
	event(api.KindWorkloadInstance, inst.ID, api.Event{Type: api.EventWarning, Reason: "RuntimeNotReady", Message: waiting}, 3)

	// A database for the instance, Ready on eu-west.
	db, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "db"},
		Spec: api.DatabaseSpec{InstanceID: inst.ID, Size: "5Gi", Retain: true}})
	require.NoError(t, err)
	fix(db.ID)
	_, err = cl.Databases().UpdateStatus(ctx, db.ID, db.ResourceVersion, api.DatabaseStatus{
		Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: db.Generation, Conditions: []api.Condition{{Type: "Ready", Status: api.ConditionTrue, Reason: "Serving", LastTransitionTime: at(20)}}},
		Runtimes: []api.DataRuntimeStatus{{RuntimeID: eu.ID, Runtime: "eu-west", Host: "db.web.svc", Port: 5432, Namespace: "web", Phase: api.PhaseReady,
			Objects: []api.AppliedObject{
				{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "web", Name: "db", Ready: true},
				{APIVersion: "v1", Kind: "Service", Namespace: "web", Name: "db", Ready: true},
			}}},
	})
	require.NoError(t, err)
	event(api.KindDatabase, db.ID, api.Event{Type: api.EventNormal, Reason: "Ready", Message: "postgres 16 serves on eu-west"}, 1)

	// A secret for the instance: its values are write-only.
	sec, err := cl.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: "web-env"},
		Spec: api.SecretSpec{InstanceIDs: []string{inst.ID}, Values: map[string]string{"API_KEY": secretMarker, "DB_PASSWORD": secretMarker + "-2"}}})
	require.NoError(t, err)
	fix(sec.ID)
	_, err = cl.Secrets().UpdateStatus(ctx, sec.ID, sec.ResourceVersion, api.SecretStatus{
		Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: sec.Generation, Conditions: []api.Condition{{Type: "Ready", Status: api.ConditionTrue, Reason: "Delivered", LastTransitionTime: at(25)}}},
		Keys:   []string{"API_KEY", "DB_PASSWORD"}, Instances: 1,
	})
	require.NoError(t, err)
	event(api.KindSecret, sec.ID, api.Event{Type: api.EventNormal, Reason: "Delivered", Message: `delivered to workload_instance "web" on 1 runtime`}, 1)
	return f
}

// normalise makes a description the same on every run: the ids the server assigned become the fixture's
// fixed ones (of the same length, so that columns keep their width), and the times the server stamped
// (creation, update, events) are set from base. The times the test wrote in statuses are kept.
func (f *describeFixture) normalise(t *testing.T, d *description) {
	t.Helper()
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	s := string(raw)
	for real, fixed := range f.ids {
		s = strings.ReplaceAll(s, real, fixed)
	}
	*d = description{}
	require.NoError(t, json.Unmarshal([]byte(s), d))
	d.Object.CreatedAt, d.Object.UpdatedAt = at(1), at(50)
	for i := range d.Events {
		e := &d.Events[i]
		first := at(10 + 10*i)
		last := first.Add(time.Duration(max(e.Count, 1)-1) * 3 * time.Minute)
		e.CreatedAt, e.FirstTimestamp, e.LastTimestamp = first, &first, &last
	}
	for i := range d.Graph.Nodes {
		d.Graph.Nodes[i].CreatedAt = at(1)
	}
}

// golden compares got with testdata/<name>.golden, or rewrites that file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: run go test -run TestDescribe ./controlplane/cmd/qleet/ -update")
	require.Equal(t, string(want), got, "describe's output changed; if that is meant, rewrite the golden files with -update")
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	f := startDescribeFixture(t)
	ctx := context.Background()
	now := at(90)

	for _, tc := range []struct{ kind, name string }{
		{api.KindWorkloadInstance, "web"},
		{api.KindWorkloadDefinition, "web"},
		{api.KindDatabase, "db"},
		{api.KindSecret, "web-env"},
		{api.KindKubernetesRuntime, "eu-west"},
		{api.KindKubernetesRuntime, "us-east"},
	} {
		t.Run("golden "+tc.kind+" "+tc.name, func(t *testing.T) {
			d, err := describeObject(ctx, f.cl.Raw(tc.kind), tc.name)
			require.NoError(t, err)
			f.normalise(t, d)
			var b strings.Builder
			require.NoError(t, d.write(&b, now))
			golden(t, tc.kind+"-"+tc.name, b.String())
		})
	}

	env := cliEnv(t, "QLEET_ENDPOINT", f.endpoint, "QLEET_TOKEN", f.adminToken)
	t.Run("the CLI prints fields and tables, not JSON", func(t *testing.T) {
		r := qleetIn(ctx, env, "describe", "instance", "web")
		require.Equal(t, 0, r.code, r.stderr)
		require.Regexp(t, `(?m)^Labels:\s+app=quickstart$`, r.stdout)
		require.Regexp(t, `(?m)^Root cause:\s+workload_instance "web" → kubernetes_runtime "us-east" \(Reconciling: cannot reach`, r.stdout)
		require.Regexp(t, `(?m)^    RUNTIME\s+REGION\s+REPLICAS\s+READY REPLICAS\s+AVAILABLE REPLICAS\s+PHASE\s+MESSAGE$`, r.stdout, "placements as a table")
		require.Regexp(t, `(?m)^  Warning\s+RuntimeNotReady\s+\S+\s+3\s+kubernetes_runtime "us-east" is not Ready$`, r.stdout, "a repeated event, counted")
		require.NotContains(t, r.stdout, "{", "no JSON")
		require.NotContains(t, r.stdout, `"definition_id"`, "no JSON")
		require.Equal(t, 2, strings.Count(r.stdout, "Deployment"), "each applied object once, not again under its placement: %s", r.stdout)
	})
	t.Run("-o json and -o yaml give the object and its events as data", func(t *testing.T) {
		for _, o := range []string{"json", "yaml"} {
			r := qleetIn(ctx, env, "describe", "instance", "web", "-o", o)
			require.Equal(t, 0, r.code, r.stderr)
			var d struct {
				Object api.WorkloadInstance `json:"object"`
				Events []api.Event          `json:"events"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &d), o)
			require.Equal(t, "web", d.Object.Name)
			require.Len(t, d.Object.Status.Placements, 2)
			require.Len(t, d.Events, 3)
		}
	})
	t.Run("a write-only value never shows, to any role", func(t *testing.T) {
		tok, err := f.cl.Tokens().Create(ctx, api.TokenRequest{Name: "describe-controller", Role: api.RoleController})
		require.NoError(t, err)
		ctl, err := client.New(f.endpoint, client.WithToken(tok.Token))
		require.NoError(t, err)
		sec, err := ctl.Secrets().GetByName(ctx, "web-env")
		require.NoError(t, err)
		require.Equal(t, secretMarker, sec.Spec.Values["API_KEY"], "the controller role reads the values: they are there to be shown")

		for _, who := range []struct{ token, want string }{{f.adminToken, "<sealed>"}, {tok.Token, "<set>"}} {
			env := cliEnv(t, "QLEET_ENDPOINT", f.endpoint, "QLEET_TOKEN", who.token)
			for _, args := range [][]string{{"describe", "secret", "web-env"}, {"describe", "runtime", "eu-west"}} {
				r := qleetIn(ctx, env, args...)
				require.Equal(t, 0, r.code, r.stderr)
				require.NotContains(t, r.stdout, secretMarker)
				require.NotContains(t, r.stdout, kubeconfigMarker)
				require.Regexp(t, `(?m)^  (Values|Kubeconfig):\s+`+who.want+`$`, r.stdout, "%v", args)
			}
		}
		r := qleetIn(ctx, env, "describe", "secret", "web-env", "-o", "json")
		require.Equal(t, 0, r.code, r.stderr)
		require.NotContains(t, r.stdout, secretMarker, "nor in the data an admin gets")
	})
}

// A field the CLI's types do not have (a newer server's) still shows, by its JSON name, and a list of
// flat records under it is a table.
func TestDescribeShowsFieldsItDoesNotKnow(t *testing.T) {
	t.Parallel()
	d := &description{Object: &api.RawObject{
		Meta: api.Meta{Kind: api.KindDatabase, Name: "db", ID: "id-1", Generation: 1},
		Spec: json.RawMessage(`{"engine":"postgres","shard_count":3}`),
		Status: json.RawMessage(`{"phase":"Ready","observed_generation":1,"failover":{"standby_zone":"b"},` +
			`"consumers":[{"kind":"workload_instance","name":"web","since":"x"},{"kind":"workload_instance","name":"api"}],` +
			`"routes":[{"host":"a.example","backend":{"port":80}},{"host":"b.example"}]}`),
	}}
	var b strings.Builder
	require.NoError(t, d.write(&b, base))
	out := b.String()
	require.Regexp(t, `(?m)^  Shard Count:\s+3$`, out)
	require.Regexp(t, `(?m)^  Failover:\n    Standby Zone:\s+b$`, out)
	require.Regexp(t, `(?m)^    KIND\s+NAME\s+SINCE$\n^    workload_instance\s+web\s+x$\n^    workload_instance\s+api\s+-$`, out)
	require.Contains(t, out, "  Routes:\n    - Host:  a.example\n      Backend:\n        Port:  80\n    - Host:  b.example\n",
		"records that are not flat: items, each marked with -")
}

// Text of several lines is a block of its own, indented as it was written; of many events, the latest
// show, and the heading says how to see them all.
func TestDescribeTextBlocksAndManyEvents(t *testing.T) {
	t.Parallel()
	var evs []api.Event
	for i := range 12 {
		evs = append(evs, api.Event{Type: api.EventNormal, Reason: fmt.Sprintf("Step%d", i), Message: "line one\nline two", CreatedAt: at(i)})
	}
	d := &description{Object: &api.RawObject{
		Meta:   api.Meta{Kind: api.KindWorkloadDefinition, Name: "raw", ID: "id-1", Generation: 1},
		Spec:   json.RawMessage(`{"manifests":"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n","cluster_scoped":true}`),
		Status: json.RawMessage(`{"phase":"Ready","observed_generation":1,"instances":0}`),
	}, Events: evs}
	var b strings.Builder
	require.NoError(t, d.write(&b, at(30)))
	out := b.String()
	require.Contains(t, out, "Spec:\n  Cluster Scoped:  true\n  Manifests:\n    apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: a\nStatus:\n  Instances:  0\n")
	require.Contains(t, out, "Events (the last 10 of 12; qleet events workload_definition raw lists them all):")
	require.NotRegexp(t, `Step[01]\s`, out, "the two oldest are left out")
	require.Regexp(t, `(?m)^  Normal\s+Step11\s+19m0s\s+1\s+line one line two$`, out, "the latest, its message on one line")
}
