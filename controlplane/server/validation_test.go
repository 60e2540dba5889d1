package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
)

// TestValidationNamesTheField posts bad bodies and checks that each answers 400 naming the field, and that
// nothing was written.
func TestValidationNamesTheField(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rt, def, _ := e.world(t, "v")
	helmDef, err := e.dev.WorkloadDefinitions().Create(context.Background(), &api.WorkloadDefinition{Meta: api.Meta{Name: "v-helm"},
		Spec: api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Chart: "nginx"}}})
	require.NoError(t, err)
	kc := strings.ReplaceAll(testKubeconfig, "\n", `\n`)
	container := func(extra string) string {
		return `{"containers":[{"name":"web","image":"nginx:1.27"` + extra + `}]}`
	}

	cases := []struct {
		name  string
		kind  string
		spec  string // the spec JSON, or a whole body when it starts with "BODY:"
		field string
		msg   string // a substring of the message
	}{
		// Decoding.
		{"bad JSON gives the byte offset", "kubernetes_runtimes", `BODY:{"name":"bad-json","spec":{"provider":}}`, "body", "byte offset 39"},
		{"truncated JSON", "kubernetes_runtimes", `BODY:{"name":"trunc","spec":{`, "body", "unexpected end"},
		{"trailing data", "kubernetes_runtimes", `BODY:{"name":"trailing","spec":{"provider":"local"}} {}`, "body", "trailing data"},
		{"not an object", "kubernetes_runtimes", `BODY:[1,2]`, "body", "must be a JSON object"},
		{"unknown top-level field", "kubernetes_runtimes", `BODY:{"name":"unk-top","spec":{"provider":"local"},"status":{}}`, "status", "unknown field"},
		{"unknown spec field", "kubernetes_runtimes", `{"provider":"local","nodez":3}`, "spec.nodez", "unknown field"},
		{"field names are case-sensitive", "kubernetes_runtimes", `{"Provider":"local"}`, "spec.Provider", "unknown field"},
		{"unknown nested field with index", "workload_definitions", `{"containers":[{"name":"web","image":"nginx","imagePullPolicy":"Always"}]}`, "spec.containers[0].imagePullPolicy", "unknown field"},
		{"wrong type", "kubernetes_runtimes", `{"provider":"local","nodes":"3"}`, "spec.nodes", "must be an integer"},
		{"wrong nested type", "workload_definitions", container(`,"ports":[{"container_port":"80"}]`), "spec.containers[0].ports[0].container_port", "must be an integer"},
		{"integer overflow", "workload_definitions", container(`,"ports":[{"container_port":99999999999}]`), "spec.containers[0].ports[0].container_port", "fits in 32 bits"},
		{"fraction for an integer", "kubernetes_runtimes", `{"provider":"local","nodes":1.5}`, "spec.nodes", "integer"},
		{"a duplicate key", "kubernetes_runtimes", `BODY:{"name":"dup-top","spec":{"provider":"local","nodes":1,"nodes":3}}`, "spec.nodes", "more than once"},
		{"a duplicate key in a list item", "workload_definitions", `{"containers":[{"name":"web","image":"nginx","image":"evil"}]}`, "spec.containers[0].image", "more than once"},
		{"a duplicate top-level key", "kubernetes_runtimes", `BODY:{"name":"dup-a","name":"dup-b","spec":{"provider":"local"}}`, "name", "more than once"},
		// Limits.
		{"too many labels", "kubernetes_runtimes", `BODY:{"name":"many-labels","labels":{` + manyLabels(api.MaxLabels+1) + `},"spec":{"provider":"local"}}`, "labels", "at most 64 labels"},
		{"too many env entries", "workload_definitions", container(`,"env":[` + manyEnv(api.MaxEnv+1) + `]`), "spec.containers[0].env", "at most 256 environment variables"},
		{"an env value too long", "workload_definitions", container(`,"env":[{"name":"BIG","value":"` + strings.Repeat("x", api.MaxEnvValueBytes+1) + `"}]`), "spec.containers[0].env[0].value", "at most 32768 bytes"},
		{"too many instance env entries", "workload_instances", fmt.Sprintf(`{"definition_id":%q,"runtime_id":%q,"env":[%s]}`, def.ID, rt.ID, manyEnv(api.MaxEnv+1)), "spec.env", "at most 256"},
		{"manifests too large", "workload_definitions", `{"manifests":"# ` + strings.Repeat("x", api.MaxDocumentBytes) + `\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"}`, "spec.manifests", "at most 524288 bytes"},
		{"helm values too large", "workload_definitions", `{"helm":{"chart":"nginx","values":"# ` + strings.Repeat("x", api.MaxDocumentBytes) + `"}}`, "spec.helm.values", "at most 524288 bytes"},
		{"labels must be strings", "kubernetes_runtimes", `BODY:{"name":"lbl-type","labels":{"a":1},"spec":{"provider":"local"}}`, `labels["a"]`, "must be a string"},
		// Meta.
		{"missing name", "kubernetes_runtimes", `BODY:{"spec":{"provider":"local"}}`, "name", "required"},
		{"uppercase name", "kubernetes_runtimes", `BODY:{"name":"Bad","spec":{"provider":"local"}}`, "name", "RFC 1123"},
		{"long name", "kubernetes_runtimes", `BODY:{"name":"` + strings.Repeat("a", 64) + `","spec":{"provider":"local"}}`, "name", "63"},
		{"bad label key", "kubernetes_runtimes", `BODY:{"name":"lbl-key","labels":{"-x":"y"},"spec":{"provider":"local"}}`, `labels["-x"]`, "key"},
		{"bad label value", "kubernetes_runtimes", `BODY:{"name":"lbl-val","labels":{"x":"a b"},"spec":{"provider":"local"}}`, `labels["x"]`, "value"},
		// kubernetes_runtime.
		{"missing provider", "kubernetes_runtimes", `{}`, "spec.provider", "required"},
		{"unknown provider", "kubernetes_runtimes", `{"provider":"gke"}`, "spec.provider", "one of"},
		{"too many local nodes", "kubernetes_runtimes", `{"provider":"local","nodes":101}`, "spec.nodes", "between 0 and 100"},
		{"negative nodes", "kubernetes_runtimes", `{"provider":"local","nodes":-1}`, "spec.nodes", "between 0 and 100"},
		{"min above max", "kubernetes_runtimes", `{"provider":"local","min_nodes":5,"max_nodes":2}`, "spec.min_nodes", "max_nodes"},
		{"eks needs a region", "kubernetes_runtimes", `{"provider":"eks"}`, "spec.region", "required"},
		{"eks needs a cloud account", "kubernetes_runtimes", `{"provider":"eks","region":"us-east-1"}`, "spec.cloud_account_id", "required"},
		{"eks region format", "kubernetes_runtimes", `{"provider":"eks","region":"useast"}`, "spec.region", "AWS region"},
		{"eks zone outside region", "kubernetes_runtimes", `{"provider":"eks","region":"us-east-1","zones":["eu-west-1a"]}`, "spec.zones[0]", "not in region"},
		{"local zone format", "kubernetes_runtimes", `{"provider":"local","zones":["Zone A"]}`, "spec.zones[0]", "RFC 1123"},
		{"kubeconfig required", "kubernetes_runtimes", `{"provider":"kubeconfig"}`, "spec.kubeconfig", "required"},
		{"kubeconfig only for kubeconfig runtimes", "kubernetes_runtimes", `{"provider":"local","kubeconfig":"` + kc + `"}`, "spec.kubeconfig", "only valid"},
		{"kubeconfig must parse", "kubernetes_runtimes", `{"provider":"kubeconfig","kubeconfig":"{{{not yaml"}`, "spec.kubeconfig", "does not parse"},
		{"kubeconfig context must resolve", "kubernetes_runtimes", `{"provider":"kubeconfig","kubeconfig":"` + kc + `","context":"prod"}`, "spec.kubeconfig", `context "prod" not found`},
		{"kubeconfig exec plugins refused", "kubernetes_runtimes", `{"provider":"kubeconfig","kubeconfig":"` + strings.ReplaceAll(kc, `token: abc`, `exec: {apiVersion: client.authentication.k8s.io/v1, command: sh}`) + `"}`, "spec.kubeconfig", "credential plugins"},
		// workload_definition.
		{"no source", "workload_definitions", `{"replicas":1}`, "spec", "exactly one of"},
		{"two sources", "workload_definitions", `{"containers":[{"name":"web","image":"nginx"}],"helm":{"chart":"x"}}`, "spec", "exactly one of"},
		{"empty containers", "workload_definitions", `{"containers":[]}`, "spec.containers", "must not be empty"},
		{"container name", "workload_definitions", `{"containers":[{"name":"Web_1","image":"nginx"}]}`, "spec.containers[0].name", "RFC 1123"},
		{"duplicate container name", "workload_definitions", `{"containers":[{"name":"web","image":"nginx"},{"name":"web","image":"nginx"}]}`, "spec.containers[1].name", "duplicate"},
		{"missing image", "workload_definitions", `{"containers":[{"name":"web"}]}`, "spec.containers[0].image", "required"},
		{"bad image", "workload_definitions", `{"containers":[{"name":"web","image":"nginx:latest:x"}]}`, "spec.containers[0].image", "not a valid image reference"},
		{"port out of range", "workload_definitions", container(`,"ports":[{"container_port":0}]`), "spec.containers[0].ports[0].container_port", "between 1 and 65535"},
		{"duplicate port", "workload_definitions", container(`,"ports":[{"container_port":80},{"container_port":80,"protocol":"TCP"}]`), "spec.containers[0].ports[1].container_port", "duplicate"},
		{"bad protocol", "workload_definitions", container(`,"ports":[{"container_port":80,"protocol":"HTTP"}]`), "spec.containers[0].ports[0].protocol", "TCP, UDP or SCTP"},
		{"bad env name", "workload_definitions", container(`,"env":[{"name":"1X","value":"y"}]`), "spec.containers[0].env[0].name", "environment variable"},
		{"bad quantity", "workload_definitions", container(`,"resources":{"requests":{"cpu":"lots"}}`), "spec.containers[0].resources.requests.cpu", "not a quantity"},
		{"requests above limits", "workload_definitions", container(`,"resources":{"requests":{"memory":"2Gi"},"limits":{"memory":"1Gi"}}`), "spec.containers[0].resources.requests.memory", "must not exceed"},
		{"probe with two actions", "workload_definitions", container(`,"liveness_probe":{"http_get_path":"/","port":80,"tcp":true}`), "spec.containers[0].liveness_probe", "exactly one of"},
		{"probe with no action", "workload_definitions", container(`,"readiness_probe":{"port":80}`), "spec.containers[0].readiness_probe", "exactly one of"},
		{"manifest without kind", "workload_definitions", `{"manifests":"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nmetadata:\n  name: b\n"}`, "spec.manifests[1].kind", "document 1"},
		{"manifest without name", "workload_definitions", `{"manifests":"apiVersion: v1\nkind: ConfigMap\n"}`, "spec.manifests[0].metadata.name", "document 0"},
		{"manifest not YAML", "workload_definitions", `{"manifests":"a: [unclosed"}`, "spec.manifests[0]", "document 0"},
		{"helm without chart", "workload_definitions", `{"helm":{"version":"1.0.0"}}`, "spec.helm.chart", "required"},
		{"helm values not YAML", "workload_definitions", `{"helm":{"chart":"nginx","values":"a: [unclosed"}}`, "spec.helm.values", "YAML"},
		{"negative replicas", "workload_definitions", `{"containers":[{"name":"web","image":"nginx"}],"replicas":-1}`, "spec.replicas", "negative"},
		{"autoscaling min", "workload_definitions", `{"containers":[{"name":"web","image":"nginx"}],"autoscaling":{"min_replicas":0,"max_replicas":3}}`, "spec.autoscaling.min_replicas", "at least 1"},
		{"autoscaling max below min", "workload_definitions", `{"containers":[{"name":"web","image":"nginx"}],"autoscaling":{"min_replicas":3,"max_replicas":2}}`, "spec.autoscaling.max_replicas", "at least min_replicas"},
		{"autoscaling target", "workload_definitions", `{"containers":[{"name":"web","image":"nginx"}],"autoscaling":{"min_replicas":1,"max_replicas":2,"target_cpu_percent":101}}`, "spec.autoscaling.target_cpu_percent", "between 1 and 100"},
		// workload_instance.
		{"definition required", "workload_instances", fmt.Sprintf(`{"runtime_id":%q}`, rt.ID), "spec.definition_id", "required"},
		{"runtime must exist", "workload_instances", fmt.Sprintf(`{"definition_id":%q,"runtime_id":"abc"}`, def.ID), "spec.runtime_id", `kubernetes_runtime "abc" not found`},
		{"definition must exist", "workload_instances", fmt.Sprintf(`{"definition_id":"abc","runtime_id":%q}`, rt.ID), "spec.definition_id", `workload_definition "abc" not found`},
		{"namespace format", "workload_instances", fmt.Sprintf(`{"definition_id":%q,"runtime_id":%q,"namespace":"Prod"}`, def.ID, rt.ID), "spec.namespace", "RFC 1123"},
		{"instance replicas", "workload_instances", fmt.Sprintf(`{"definition_id":%q,"runtime_id":%q,"replicas":-2}`, def.ID, rt.ID), "spec.replicas", "negative"},
		{"instance env", "workload_instances", fmt.Sprintf(`{"definition_id":%q,"runtime_id":%q,"env":[{"name":"A=B","value":"x"}]}`, def.ID, rt.ID), "spec.env[0].name", "environment variable"},
		{"image for an unknown container", "workload_instances", fmt.Sprintf(`{"definition_id":%q,"runtime_id":%q,"images":{"db":"postgres:16"}}`, def.ID, rt.ID), `spec.images["db"]`, `no container "db"`},
		{"image for a helm definition", "workload_instances", fmt.Sprintf(`{"definition_id":%q,"runtime_id":%q,"images":{"web":"nginx:1"}}`, helmDef.ID, rt.ID), `spec.images["web"]`, `no container "web"`},
		{"bad image override", "workload_instances", fmt.Sprintf(`{"definition_id":%q,"runtime_id":%q,"images":{"web":"-bad"}}`, def.ID, rt.ID), `spec.images["web"]`, "image reference"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("case-%d", i)
			body := `{"name":"` + name + `","spec":` + tc.spec + `}`
			if b, ok := strings.CutPrefix(tc.spec, "BODY:"); ok {
				body = b
			}
			before, err := e.admin.Raw(strings.TrimSuffix(tc.kind, "s")).List(context.Background(), client.ListOptions{Limit: 1000})
			require.NoError(t, err)
			code, data := e.raw(t, server.RoleDeveloper, http.MethodPost, "/v1/"+tc.kind, body, nil)
			require.Equal(t, http.StatusBadRequest, code, string(data))
			ae := apiErr(t, data)
			require.Equal(t, api.CodeInvalid, ae.Code)
			require.Equal(t, tc.field, ae.Field, ae.Message)
			require.Contains(t, ae.Message, tc.msg)
			_, err = e.admin.Raw(strings.TrimSuffix(tc.kind, "s")).GetByName(context.Background(), name)
			require.True(t, api.IsNotFound(err), "nothing was written")
			after, err := e.admin.Raw(strings.TrimSuffix(tc.kind, "s")).List(context.Background(), client.ListOptions{Limit: 1000})
			require.NoError(t, err)
			require.Len(t, after.Items, len(before.Items), "nothing was written")
		})
	}

	t.Run("every problem is reported at once", func(t *testing.T) {
		code, data := e.raw(t, server.RoleDeveloper, http.MethodPost, "/v1/kubernetes_runtimes", `{"name":"Bad","spec":{"provider":"gke","nodes":-1}}`, nil)
		require.Equal(t, http.StatusBadRequest, code)
		ae := apiErr(t, data)
		fields := []string{}
		for _, f := range ae.Fields {
			fields = append(fields, f.Field)
		}
		require.Equal(t, []string{"name", "spec.provider", "spec.nodes"}, fields)
	})
	t.Run("valid specs of every source pass", func(t *testing.T) {
		for i, spec := range []api.WorkloadDefinitionSpec{
			{Manifests: "# leading comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: b\n"},
			{Helm: &api.HelmSource{Repository: "https://charts.bitnami.com/bitnami", Chart: "nginx", Values: "replicaCount: 2\n"}},
			{Containers: []api.Container{{Name: "app", Image: "ghcr.io/org/app@sha256:" + strings.Repeat("a", 64),
				Env:            []api.EnvVar{{Name: "PORT", Value: "8080"}},
				Resources:      &api.Resources{Requests: api.ResourceList{CPU: "250m", Memory: "256Mi"}, Limits: api.ResourceList{CPU: "1", Memory: "1Gi"}},
				LivenessProbe:  &api.Probe{HTTPGetPath: "/healthz", Port: 8080},
				ReadinessProbe: &api.Probe{Exec: []string{"true"}},
				Ports:          []api.ContainerPort{{Name: "http", ContainerPort: 8080}, {ContainerPort: 8080, Protocol: "UDP"}},
			}}, Autoscaling: &api.Autoscaling{MinReplicas: 1, MaxReplicas: 5}},
		} {
			got, err := e.dev.WorkloadDefinitions().Create(context.Background(), &api.WorkloadDefinition{Meta: api.Meta{Name: fmt.Sprintf("ok-%d", i)}, Spec: spec})
			require.NoError(t, err)
			require.EqualValues(t, 1, *got.Spec.Replicas, "replicas default to 1")
			if spec.Autoscaling != nil {
				require.EqualValues(t, 80, got.Spec.Autoscaling.TargetCPUPercent, "CPU target defaults to 80")
			}
		}
	})
}

func manyLabels(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return strings.Join(parts, ",")
}

func manyEnv(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"name":"V%d","value":"x"}`, i)
	}
	return strings.Join(parts, ",")
}
