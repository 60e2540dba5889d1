package render

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/api"
)

func ptr[T any](v T) *T { return &v }

func containersDef(mod func(*api.WorkloadDefinitionSpec)) *api.WorkloadDefinition {
	d := &api.WorkloadDefinition{
		Meta: api.Meta{ID: "def-1", Name: "web"},
		Spec: api.WorkloadDefinitionSpec{
			Replicas: ptr(int32(2)),
			Containers: []api.Container{{
				Name:  "app",
				Image: "nginx:1.27",
				Ports: []api.ContainerPort{{ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
				Env:   []api.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "LOG", Value: "info"}},
				Resources: &api.Resources{
					Requests: api.ResourceList{CPU: "250m", Memory: "64Mi"},
					Limits:   api.ResourceList{CPU: "1"},
				},
				LivenessProbe:  &api.Probe{HTTPGetPath: "/healthz", Port: 8080, PeriodSeconds: 5},
				ReadinessProbe: &api.Probe{TCP: true, Port: 8080},
			}, {
				Name:  "sidecar",
				Image: "busybox:1.36",
				Args:  []string{"sleep", "infinity"},
			}},
		},
	}
	if mod != nil {
		mod(&d.Spec)
	}
	return d
}

func instance(mod func(*api.WorkloadInstanceSpec)) *api.WorkloadInstance {
	i := &api.WorkloadInstance{
		Meta: api.Meta{ID: "inst-1", Name: "web-us"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: "def-1", RuntimeID: "rt-1"},
	}
	if mod != nil {
		mod(&i.Spec)
	}
	return i
}

func byKind(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		_, dup := m[o.GetKind()]
		require.False(t, dup, "two objects of kind %s", o.GetKind())
		m[o.GetKind()] = o
	}
	return m
}

func nestedContainers(t *testing.T, u *unstructured.Unstructured) []map[string]any {
	t.Helper()
	cs, found, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.True(t, found)
	out := make([]map[string]any, len(cs))
	for i, c := range cs {
		out[i] = c.(map[string]any)
	}
	return out
}

func TestRenderContainers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := &Renderer{}

	t.Run("renders a namespace, a deployment and a service", func(t *testing.T) {
		t.Parallel()
		objs, err := r.Render(ctx, containersDef(nil), instance(nil), "")
		require.NoError(t, err)
		require.Equal(t, "Namespace", objs[0].GetKind(), "the namespace comes first")
		require.Equal(t, "web-us", objs[0].GetName(), "the namespace is derived from the instance name")
		k := byKind(t, objs)
		require.Len(t, k, 3)

		dep := k["Deployment"]
		require.Equal(t, "apps/v1", dep.GetAPIVersion())
		require.Equal(t, "web-us", dep.GetName())
		require.Equal(t, "web-us", dep.GetNamespace())
		replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
		require.EqualValues(t, 2, replicas)
		sel, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "selector", "matchLabels")
		require.Equal(t, map[string]string{LabelInstance: "web-us"}, sel)
		podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
		require.Equal(t, "web", podLabels[LabelName])
		_, hasTS, _ := unstructured.NestedFieldNoCopy(dep.Object, "metadata", "creationTimestamp")
		require.False(t, hasTS, "null fields are dropped")
		_, hasStatus := dep.Object["status"]
		require.False(t, hasStatus)

		cs := nestedContainers(t, dep)
		require.Len(t, cs, 2)
		require.Equal(t, "nginx:1.27", cs[0]["image"])
		res := cs[0]["resources"].(map[string]any)
		require.Equal(t, "250m", res["requests"].(map[string]any)["cpu"])
		require.Equal(t, "1", res["limits"].(map[string]any)["cpu"])
		live := cs[0]["livenessProbe"].(map[string]any)
		require.Equal(t, "/healthz", live["httpGet"].(map[string]any)["path"])
		require.EqualValues(t, 8080, live["httpGet"].(map[string]any)["port"])
		ready := cs[0]["readinessProbe"].(map[string]any)
		require.EqualValues(t, 8080, ready["tcpSocket"].(map[string]any)["port"])
		require.Equal(t, []any{"sleep", "infinity"}, cs[1]["args"])

		svc := k["Service"]
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		require.Len(t, ports, 2)
		require.Equal(t, "tcp-8080", ports[0].(map[string]any)["name"])
		require.Equal(t, "metrics", ports[1].(map[string]any)["name"])
		svcSel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		require.Equal(t, sel, svcSel)
	})

	t.Run("no ports means no service", func(t *testing.T) {
		t.Parallel()
		def := containersDef(func(s *api.WorkloadDefinitionSpec) {
			for i := range s.Containers {
				s.Containers[i].Ports = nil
			}
		})
		objs, err := r.Render(ctx, def, instance(nil), "")
		require.NoError(t, err)
		k := byKind(t, objs)
		require.NotContains(t, k, "Service")
		require.Contains(t, k, "Deployment")
	})

	replicaCases := []struct {
		name     string
		def, ins *int32
		want     int64
	}{
		{name: "instance override wins", def: ptr(int32(2)), ins: ptr(int32(5)), want: 5},
		{name: "definition replicas", def: ptr(int32(2)), want: 2},
		{name: "default one", want: 1},
		{name: "zero override is honoured", def: ptr(int32(2)), ins: ptr(int32(0)), want: 0},
	}
	for _, tc := range replicaCases {
		t.Run("replicas: "+tc.name, func(t *testing.T) {
			t.Parallel()
			def := containersDef(func(s *api.WorkloadDefinitionSpec) { s.Replicas = tc.def })
			objs, err := r.Render(ctx, def, instance(func(s *api.WorkloadInstanceSpec) { s.Replicas = tc.ins }), "")
			require.NoError(t, err)
			got, found, _ := unstructured.NestedInt64(byKind(t, objs)["Deployment"].Object, "spec", "replicas")
			require.True(t, found)
			require.Equal(t, tc.want, got)
		})
	}

	t.Run("instance env and images override per container", func(t *testing.T) {
		t.Parallel()
		inst := instance(func(s *api.WorkloadInstanceSpec) {
			s.Env = []api.EnvVar{{Name: "LOG", Value: "debug"}, {Name: "REGION", Value: "us"}}
			s.Images = map[string]string{"app": "nginx:1.28"}
		})
		objs, err := r.Render(ctx, containersDef(nil), inst, "")
		require.NoError(t, err)
		cs := nestedContainers(t, byKind(t, objs)["Deployment"])
		require.Equal(t, "nginx:1.28", cs[0]["image"])
		require.Equal(t, "busybox:1.36", cs[1]["image"], "other containers keep their image")
		require.Equal(t, []any{
			map[string]any{"name": "MODE", "value": "prod"},
			map[string]any{"name": "LOG", "value": "debug"},
			map[string]any{"name": "REGION", "value": "us"},
		}, cs[0]["env"])
		require.Equal(t, []any{map[string]any{"name": "LOG", "value": "debug"}, map[string]any{"name": "REGION", "value": "us"}}, cs[1]["env"])
	})

	t.Run("autoscaling renders an HPA and leaves replicas to it", func(t *testing.T) {
		t.Parallel()
		def := containersDef(func(s *api.WorkloadDefinitionSpec) {
			s.Autoscaling = &api.Autoscaling{MinReplicas: 2, MaxReplicas: 7, TargetCPUPercent: 60}
		})
		objs, err := r.Render(ctx, def, instance(func(s *api.WorkloadInstanceSpec) { s.Replicas = ptr(int32(4)) }), "")
		require.NoError(t, err)
		k := byKind(t, objs)
		_, found, _ := unstructured.NestedFieldNoCopy(k["Deployment"].Object, "spec", "replicas")
		require.False(t, found, "spec.replicas is owned by the HPA")
		hpa := k["HorizontalPodAutoscaler"]
		require.Equal(t, "autoscaling/v2", hpa.GetAPIVersion())
		minR, _, _ := unstructured.NestedInt64(hpa.Object, "spec", "minReplicas")
		maxR, _, _ := unstructured.NestedInt64(hpa.Object, "spec", "maxReplicas")
		require.EqualValues(t, 2, minR)
		require.EqualValues(t, 7, maxR)
		ref, _, _ := unstructured.NestedStringMap(hpa.Object, "spec", "scaleTargetRef")
		require.Equal(t, map[string]string{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-us"}, ref)
		metrics, _, _ := unstructured.NestedSlice(hpa.Object, "spec", "metrics")
		require.Len(t, metrics, 1)
		util, _, _ := unstructured.NestedInt64(metrics[0].(map[string]any), "resource", "target", "averageUtilization")
		require.EqualValues(t, 60, util)
	})

	t.Run("spec.namespace wins over the derived one", func(t *testing.T) {
		t.Parallel()
		objs, err := r.Render(ctx, containersDef(nil), instance(func(s *api.WorkloadInstanceSpec) { s.Namespace = "shop" }), "")
		require.NoError(t, err)
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				require.Equal(t, "shop", o.GetName())
			} else {
				require.Equal(t, "shop", o.GetNamespace())
			}
		}
	})

	t.Run("a quantity that does not parse is an error", func(t *testing.T) {
		t.Parallel()
		def := containersDef(func(s *api.WorkloadDefinitionSpec) {
			s.Containers[0].Resources.Requests.CPU = "lots"
		})
		_, err := r.Render(ctx, def, instance(nil), "")
		require.ErrorContains(t, err, `containers[0] (app): resources.requests: cpu "lots"`)
	})
}

const testManifests = `
# a comment-only document
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  a: "1"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: elsewhere
spec:
  replicas: 3
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: api
        image: example/api:1
        env:
        - name: LOG
          value: info
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
rules: []
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Secret
  metadata:
    name: token
- apiVersion: example.com/v1
  kind: Widget
  metadata:
    name: foo
`

func TestRenderManifests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := &Renderer{}
	def := &api.WorkloadDefinition{Meta: api.Meta{Name: "raw"}, Spec: api.WorkloadDefinitionSpec{Manifests: testManifests, Replicas: ptr(int32(1))}}

	t.Run("parses every document and defaults namespaces", func(t *testing.T) {
		t.Parallel()
		objs, err := r.Render(ctx, def, instance(nil), "")
		require.NoError(t, err)
		var got []string
		for _, o := range objs {
			got = append(got, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
		}
		require.Equal(t, []string{
			"Namespace//web-us",
			"ConfigMap/web-us/settings",
			"Deployment/elsewhere/api",
			"ClusterRole//reader",
			"Secret/web-us/token",
			"Widget/web-us/foo",
		}, got)
		dep := objs[2]
		replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
		require.EqualValues(t, 3, replicas, "the definition's default replicas do not override manifests")
	})

	t.Run("instance overrides reach manifest workloads", func(t *testing.T) {
		t.Parallel()
		inst := instance(func(s *api.WorkloadInstanceSpec) {
			s.Replicas = ptr(int32(6))
			s.Env = []api.EnvVar{{Name: "LOG", Value: "debug"}}
			s.Images = map[string]string{"api": "example/api:2"}
		})
		objs, err := r.Render(ctx, def, inst, "")
		require.NoError(t, err)
		dep := objs[2]
		replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
		require.EqualValues(t, 6, replicas)
		cs := nestedContainers(t, dep)
		require.Equal(t, "example/api:2", cs[0]["image"])
		require.Equal(t, []any{map[string]any{"name": "LOG", "value": "debug"}}, cs[0]["env"])
	})

	bad := []struct{ name, doc, want string }{
		{name: "missing kind", doc: "apiVersion: v1\nmetadata: {name: x}\n", want: "document 0"},
		{name: "missing name", doc: "apiVersion: v1\nkind: ConfigMap\n", want: "metadata.name are required"},
		{name: "not YAML", doc: "a: [1\n", want: "document 0"},
	}
	for _, tc := range bad {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseManifests(tc.doc)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// writeChart writes a small chart into a temporary directory and returns its path.
func writeChart(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

// demoChart is a chart with a CRD, a Deployment whose replicas and image come from values, and a
// test hook that must not be rendered.
var demoChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: demo\nversion: 0.1.0\n",
	"values.yaml": "replicas: 1\nimage: nginx:1.27\n",
	"crds/widgets.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`,
	"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-demo
  labels:
    kube: "{{ .Capabilities.KubeVersion.Version }}"
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: {{ .Release.Name }}-demo}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}-demo}
    spec:
      containers:
      - name: demo
        image: {{ .Values.image }}
`,
	"templates/tests/hook.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    "helm.sh/hook": test
spec:
  containers: [{name: t, image: busybox}]
`,
}

func TestRenderHelm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := &Renderer{HelmCacheDir: t.TempDir(), ChartDir: os.TempDir()} // the charts below are in tests' temp dirs

	t.Run("renders a local chart with values", func(t *testing.T) {
		t.Parallel()
		dir := writeChart(t, demoChart)
		def := &api.WorkloadDefinition{Meta: api.Meta{Name: "demo"}, Spec: api.WorkloadDefinitionSpec{
			Helm: &api.HelmSource{Chart: dir, Values: "replicas: 4\n"},
		}}
		objs, err := r.Render(ctx, def, instance(func(s *api.WorkloadInstanceSpec) { s.Images = map[string]string{"demo": "nginx:1.28"} }), "v1.31.4")
		require.NoError(t, err)
		var got []string
		for _, o := range objs {
			got = append(got, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
		}
		require.Equal(t, []string{"Namespace//web-us", "CustomResourceDefinition//widgets.example.com", "Deployment/web-us/web-us-demo"}, got)
		dep := objs[2]
		replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
		require.EqualValues(t, 4, replicas)
		require.Equal(t, "v1.31.4", dep.GetLabels()["kube"], "the runtime's version reaches .Capabilities")
		require.Equal(t, "nginx:1.28", nestedContainers(t, dep)[0]["image"])
	})

	t.Run("a template that fails is an error naming the chart", func(t *testing.T) {
		t.Parallel()
		files := map[string]string{}
		for k, v := range demoChart {
			files[k] = v
		}
		files["templates/broken.yaml"] = "kind: {{ .Values.missing.field }}\n"
		dir := writeChart(t, files)
		def := &api.WorkloadDefinition{Meta: api.Meta{Name: "demo"}, Spec: api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Chart: dir}}}
		_, err := r.Render(ctx, def, instance(nil), "")
		require.ErrorContains(t, err, "render")
		require.ErrorContains(t, err, "broken.yaml")
	})

	t.Run("a missing local chart is an error", func(t *testing.T) {
		t.Parallel()
		def := &api.WorkloadDefinition{Meta: api.Meta{Name: "demo"}, Spec: api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Chart: filepath.Join(t.TempDir(), "nope")}}}
		_, err := r.Render(ctx, def, instance(nil), "")
		require.ErrorContains(t, err, "nope")
		var fe *FetchError
		require.NotErrorAs(t, err, &fe)
	})

	t.Run("local charts come only from the chart directory, and errors do not probe the disk", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		confined := &Renderer{HelmCacheDir: t.TempDir(), ChartDir: root}
		inside := writeChart(t, demoChart)
		require.NoError(t, os.Rename(inside, filepath.Join(root, "demo")))
		outside := writeChart(t, demoChart)
		require.NoError(t, os.Symlink(outside, filepath.Join(root, "link-out")))
		render := func(r *Renderer, chart string) error {
			def := &api.WorkloadDefinition{Meta: api.Meta{Name: "demo"}, Spec: api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Chart: chart}}}
			_, err := r.Render(ctx, def, instance(nil), "")
			return err
		}
		require.NoError(t, render(confined, "demo"), "a chart named relative to the chart directory")
		require.NoError(t, render(confined, filepath.Join(root, "demo")), "or by its absolute path inside it")
		msg := func(err error, chart string) string {
			require.Error(t, err)
			return strings.ReplaceAll(err.Error(), fmt.Sprintf("%q", chart), "CHART")
		}
		want := msg(render(confined, "missing"), "missing")
		for _, chart := range []string{outside, "../" + filepath.Base(filepath.Dir(outside)), "link-out", "/etc", "/etc/passwd", "/nonexistent"} {
			require.Equal(t, want, msg(render(confined, chart), chart), "%s: the same answer as a missing chart", chart)
		}
		err := render(&Renderer{HelmCacheDir: t.TempDir()}, inside)
		require.ErrorContains(t, err, "local charts are disabled")
	})

	t.Run("an unreachable repository is a fetch error", func(t *testing.T) {
		t.Parallel()
		def := &api.WorkloadDefinition{Meta: api.Meta{Name: "demo"}, Spec: api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Repository: "http://127.0.0.1:1/charts", Chart: "demo", Version: "0.1.0"}}}
		_, err := r.Render(ctx, def, instance(nil), "")
		var fe *FetchError
		require.ErrorAs(t, err, &fe)
	})
}

func TestEngineOf(t *testing.T) {
	require.Equal(t, int32(3306), EngineOf(&api.DatabaseSpec{Engine: api.EngineMySQL, Version: "8.4"}).Port)
	require.Equal(t, "postgres:16", EngineOf(&api.DatabaseSpec{Engine: api.EnginePostgres, Version: "16"}).Image)
}
