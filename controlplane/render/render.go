package render

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// Labels that rendered container workloads carry; the Deployment's selector is LabelInstance alone.
const (
	// LabelName is the definition name.
	LabelName = "app.kubernetes.io/name"
	// LabelInstance is the instance name; it selects the instance's pods.
	LabelInstance = "app.kubernetes.io/instance"
)

// FetchError says a chart could not be downloaded. Unlike other render errors it may pass, so it is
// retried rather than failing the object.
type FetchError struct{ Err error }

func (e *FetchError) Error() string { return "fetch chart: " + e.Err.Error() }
func (e *FetchError) Unwrap() error { return e.Err }

// Renderer turns a workload definition and an instance into Kubernetes objects. It is safe for
// concurrent use. The zero value is ready to use.
type Renderer struct {
	// HelmCacheDir holds downloaded charts and repository indexes (default: <os.TempDir()>/qleet-helm).
	HelmCacheDir string
	// ChartDir is the only directory local charts (a chart with no repository) are read from: the
	// chart names a directory or archive under it, by a path relative to it (or absolute, inside it).
	// Empty refuses local charts. A chart outside it, missing, or reached through a link leading out of
	// it gets the same error, so that errors do not tell what exists on the control plane's disk.
	ChartDir string

	mu     sync.Mutex
	charts map[string]string // pinned repository charts already downloaded: key -> local path
}

// Namespace returns the namespace an instance runs in: spec.namespace, or the instance name.
func Namespace(inst *api.WorkloadInstance) string {
	if inst.Spec.Namespace != "" {
		return inst.Spec.Namespace
	}
	return inst.Name
}

// Render returns the objects that run def as inst: the instance's Namespace first, then, for
// containers, a Deployment, a Service when ports are declared and a HorizontalPodAutoscaler when
// autoscaling is set; for manifests, the parsed documents; for Helm, the rendered chart (hooks left
// out). Namespaced objects that name no namespace get the instance's. The instance's overrides (replicas,
// env, images per container name) apply to every workload's pod template. kubeVersion (e.g. "v1.31.4";
// may be empty) is what Helm charts see as .Capabilities.KubeVersion.
//
// Errors mean the definition cannot be rendered as it is, except *FetchError (a chart download failed).
func (r *Renderer) Render(ctx context.Context, def *api.WorkloadDefinition, inst *api.WorkloadInstance, kubeVersion string) ([]*unstructured.Unstructured, error) {
	ns := Namespace(inst)
	var objs []*unstructured.Unstructured
	var err error
	switch {
	case len(def.Spec.Containers) > 0:
		objs, err = renderContainers(def, inst, ns)
	case def.Spec.Manifests != "":
		objs, err = ParseManifests(def.Spec.Manifests)
		if err == nil {
			err = overrideWorkloads(objs, inst)
		}
	case def.Spec.Helm != nil:
		objs, err = r.renderHelm(ctx, def.Spec.Helm, inst.Name, ns, kubeVersion)
		if err == nil {
			err = overrideWorkloads(objs, inst)
		}
	default:
		err = errors.New("the definition has no containers, manifests or helm chart")
	}
	if err != nil {
		return nil, err
	}
	out := []*unstructured.Unstructured{namespaceObject(ns)}
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GetName() == ns {
			continue // the instance's own namespace is already first
		}
		if o.GetNamespace() == "" && !clusterScoped[o.GetKind()] {
			o.SetNamespace(ns)
		}
		out = append(out, o)
	}
	return out, nil
}

// clusterScoped lists well-known cluster-scoped kinds. Other kinds get the instance namespace; Apply
// drops it again from any kind the cluster says is cluster-scoped.
var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"PersistentVolume": true, "StorageClass": true, "PriorityClass": true, "IngressClass": true,
	"APIService": true, "ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true,
	"CSIDriver": true, "RuntimeClass": true, "Node": true, "ValidatingAdmissionPolicy": true,
	"ValidatingAdmissionPolicyBinding": true,
}

func namespaceObject(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	u.SetName(ns)
	return u
}

// DesiredReplicas is the instance override, else the definition's, else 1.
func DesiredReplicas(def *api.WorkloadDefinition, inst *api.WorkloadInstance) int32 {
	switch {
	case inst.Spec.Replicas != nil:
		return *inst.Spec.Replicas
	case def.Spec.Replicas != nil:
		return *def.Spec.Replicas
	}
	return 1
}

func renderContainers(def *api.WorkloadDefinition, inst *api.WorkloadInstance, ns string) ([]*unstructured.Unstructured, error) {
	typed, err := typedContainers(def, inst, ns)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(typed))
	for _, t := range typed {
		var m map[string]any
		switch o := t.(type) {
		case *appsv1.Deployment:
			m = deploymentMap(o)
		case *corev1.Service:
			m = serviceMap(o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			m = hpaMap(o)
		default:
			return nil, fmt.Errorf("convert %T: not a kind renderContainers makes", t)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// typedContainers builds the Deployment, and the Service and HorizontalPodAutoscaler when asked for, of a
// definition with containers (see maps.go for their conversion).
func typedContainers(def *api.WorkloadDefinition, inst *api.WorkloadInstance, ns string) ([]runtime.Object, error) {
	selector := map[string]string{LabelInstance: inst.Name}
	podLabels := map[string]string{LabelInstance: inst.Name, LabelName: def.Name}
	var containers []corev1.Container
	var svcPorts []corev1.ServicePort
	for i := range def.Spec.Containers {
		c, err := container(&def.Spec.Containers[i], inst)
		if err != nil {
			return nil, fmt.Errorf("containers[%d] (%s): %w", i, def.Spec.Containers[i].Name, err)
		}
		containers = append(containers, c)
		for _, p := range c.Ports {
			name := p.Name
			if name == "" {
				name = fmt.Sprintf("%s-%d", strings.ToLower(string(p.Protocol)), p.ContainerPort)
			}
			svcPorts = append(svcPorts, corev1.ServicePort{
				Name: name, Protocol: p.Protocol, Port: p.ContainerPort, TargetPort: intstr.FromInt32(p.ContainerPort),
			})
		}
	}
	meta := metav1.ObjectMeta{Name: inst.Name, Namespace: ns, Labels: podLabels}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{Containers: containers},
			},
		},
	}
	// With autoscaling the HPA owns spec.replicas: leaving it out of the applied object releases qleet's
	// ownership of the field, so re-applies never fight the autoscaler.
	if def.Spec.Autoscaling == nil {
		n := DesiredReplicas(def, inst)
		dep.Spec.Replicas = &n
	}
	typed := []runtime.Object{dep}
	if len(svcPorts) > 0 {
		typed = append(typed, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: meta,
			Spec:       corev1.ServiceSpec{Selector: selector, Ports: svcPorts},
		})
	}
	if a := def.Spec.Autoscaling; a != nil {
		target := a.TargetCPUPercent
		if target == 0 {
			target = 80
		}
		minR := a.MinReplicas
		typed = append(typed, &autoscalingv2.HorizontalPodAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
			ObjectMeta: meta,
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: inst.Name},
				MinReplicas:    &minR,
				MaxReplicas:    a.MaxReplicas,
				Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricSource{
						Name:   corev1.ResourceCPU,
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target},
					},
				}},
			},
		})
	}
	return typed, nil
}

// dropNulls removes null values (e.g. metadata.creationTimestamp of typed objects), so that applied
// objects claim no fields they do not set.
func dropNulls(m map[string]any) map[string]any {
	for k, v := range m {
		switch t := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			m[k] = dropNulls(t)
		case []any:
			for i, e := range t {
				if em, ok := e.(map[string]any); ok {
					t[i] = dropNulls(em)
				}
			}
		}
	}
	return m
}

func container(c *api.Container, inst *api.WorkloadInstance) (corev1.Container, error) {
	out := corev1.Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args}
	if img, ok := inst.Spec.Images[c.Name]; ok && img != "" {
		out.Image = img
	}
	for _, p := range c.Ports {
		proto := corev1.Protocol(p.Protocol)
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out.Ports = append(out.Ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, Protocol: proto})
	}
	for _, e := range mergeEnv(c.Env, inst.Spec.Env) {
		out.Env = append(out.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	if c.Resources != nil {
		var err error
		if out.Resources.Requests, err = resourceList(c.Resources.Requests); err != nil {
			return out, fmt.Errorf("resources.requests: %w", err)
		}
		if out.Resources.Limits, err = resourceList(c.Resources.Limits); err != nil {
			return out, fmt.Errorf("resources.limits: %w", err)
		}
	}
	out.LivenessProbe = probe(c.LivenessProbe)
	out.ReadinessProbe = probe(c.ReadinessProbe)
	return out, nil
}

// mergeEnv returns base with overrides applied: a variable of the same name is replaced in place, new
// ones are appended in order.
func mergeEnv(base, overrides []api.EnvVar) []api.EnvVar {
	out := append([]api.EnvVar{}, base...)
	for _, o := range overrides {
		replaced := false
		for i := range out {
			if out[i].Name == o.Name {
				out[i].Value = o.Value
				replaced = true
			}
		}
		if !replaced {
			out = append(out, o)
		}
	}
	return out
}

func resourceList(r api.ResourceList) (corev1.ResourceList, error) {
	if r.CPU == "" && r.Memory == "" {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: r.CPU, corev1.ResourceMemory: r.Memory} {
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", name, v, err)
		}
		out[name] = q
	}
	return out, nil
}

func probe(p *api.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	out := &corev1.Probe{InitialDelaySeconds: p.InitialDelaySeconds, PeriodSeconds: p.PeriodSeconds}
	switch {
	case p.HTTPGetPath != "":
		out.HTTPGet = &corev1.HTTPGetAction{Path: p.HTTPGetPath, Port: intstr.FromInt32(p.Port)}
	case p.TCP:
		out.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(p.Port)}
	case len(p.Exec) > 0:
		out.Exec = &corev1.ExecAction{Command: p.Exec}
	}
	return out
}

// ParseManifests parses a multi-document YAML of Kubernetes objects. Empty documents are skipped, and
// List objects are flattened. Every object needs apiVersion, kind and metadata.name.
func ParseManifests(doc string) ([]*unstructured.Unstructured, error) {
	rd := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(doc)))
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		raw, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", i, err)
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", i, err)
		}
		if t := strings.TrimSpace(string(js)); t == "null" || t == "" || t == "{}" {
			continue
		}
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode(js, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", i, err)
		}
		var objs []*unstructured.Unstructured
		switch t := obj.(type) {
		case *unstructured.Unstructured:
			objs = []*unstructured.Unstructured{t}
		case *unstructured.UnstructuredList:
			for j := range t.Items {
				objs = append(objs, &t.Items[j])
			}
		default:
			return nil, fmt.Errorf("manifest document %d: unexpected %T", i, obj)
		}
		for _, o := range objs {
			if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
				return nil, fmt.Errorf("manifest document %d: apiVersion, kind and metadata.name are required", i)
			}
			out = append(out, o)
		}
	}
	return out, nil
}

// podSpecPath says where a workload kind keeps its pod spec.
func podSpecPath(kind string) []string {
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		return []string{"spec", "template", "spec"}
	case "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	return nil
}

// overrideWorkloads applies the instance's overrides to parsed or chart-rendered objects: replicas to
// Deployments and StatefulSets (only when the instance sets them), images by container name and env
// to every container of every pod template.
func overrideWorkloads(objs []*unstructured.Unstructured, inst *api.WorkloadInstance) error {
	for _, o := range objs {
		kind := o.GetKind()
		if inst.Spec.Replicas != nil && (kind == "Deployment" || kind == "StatefulSet") {
			if err := unstructured.SetNestedField(o.Object, int64(*inst.Spec.Replicas), "spec", "replicas"); err != nil {
				return fmt.Errorf("%s/%s: replicas: %w", kind, o.GetName(), err)
			}
		}
		path := podSpecPath(kind)
		if path == nil || (len(inst.Spec.Images) == 0 && len(inst.Spec.Env) == 0) {
			continue
		}
		cpath := append(append([]string{}, path...), "containers")
		cs, found, err := unstructured.NestedSlice(o.Object, cpath...)
		if err != nil || !found {
			continue
		}
		for i, c := range cs {
			cm, ok := c.(map[string]any)
			if !ok {
				continue
			}
			name, _ := cm["name"].(string)
			if img, ok := inst.Spec.Images[name]; ok && img != "" {
				cm["image"] = img
			}
			if len(inst.Spec.Env) > 0 {
				cm["env"] = mergeEnvUnstructured(cm["env"], inst.Spec.Env)
			}
			cs[i] = cm
		}
		if err := unstructured.SetNestedSlice(o.Object, cs, cpath...); err != nil {
			return fmt.Errorf("%s/%s: containers: %w", kind, o.GetName(), err)
		}
	}
	return nil
}

func mergeEnvUnstructured(env any, overrides []api.EnvVar) []any {
	list, _ := env.([]any)
	out := append([]any{}, list...)
	for _, o := range overrides {
		replaced := false
		for i, e := range out {
			if em, ok := e.(map[string]any); ok && em["name"] == o.Name {
				out[i] = map[string]any{"name": o.Name, "value": o.Value}
				replaced = true
			}
		}
		if !replaced {
			out = append(out, map[string]any{"name": o.Name, "value": o.Value})
		}
	}
	return out
}

// renderHelm renders a chart client-side, like `helm template`: release name and namespace are the
// instance's, CRDs from the chart's crds/ directory are included, hooks are not.
func (r *Renderer) renderHelm(ctx context.Context, h *api.HelmSource, release, namespace, kubeVersion string) (objs []*unstructured.Unstructured, err error) {
	_, span := telemetry.Start(ctx, "helm template "+h.Chart, trace.WithAttributes(
		attribute.String("helm.chart", h.Chart), attribute.String("helm.version", h.Version), attribute.String("helm.repository", h.Repository)))
	defer func() { telemetry.End(span, err) }()
	path, err := r.locateChart(ctx, h)
	if err != nil {
		return nil, err
	}
	chrt, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("helm chart %q: %w", h.Chart, err)
	}
	vals := map[string]any{}
	if strings.TrimSpace(h.Values) != "" {
		if err := yaml.Unmarshal([]byte(h.Values), &vals); err != nil {
			return nil, fmt.Errorf("helm values: %w", err)
		}
	}
	manifest, err := Template(chrt, vals, release, namespace, kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("helm chart %q: render: %w", h.Chart, err)
	}
	objs, err = ParseManifests(manifest)
	if err != nil {
		return nil, fmt.Errorf("helm chart %q: %w", h.Chart, err)
	}
	return objs, nil
}

// localChart resolves a local chart under ChartDir.
func (r *Renderer) localChart(chart string) (string, error) {
	unavailable := fmt.Errorf("helm chart %q: no such chart in the control plane's chart directory (local charts are read only from there; give a repository otherwise)", chart)
	if r.ChartDir == "" {
		return "", fmt.Errorf("helm chart %q: local charts are disabled (the control plane has no chart directory); give a repository", chart)
	}
	root, err := filepath.EvalSymlinks(r.ChartDir)
	if err != nil {
		return "", unavailable
	}
	p := chart
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		return "", unavailable
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", unavailable
	}
	return real, nil
}

// locateChart returns the local path of the chart: h.Chart itself when no repository is given,
// otherwise a download into the cache (pinned versions are downloaded once per process).
func (r *Renderer) locateChart(ctx context.Context, h *api.HelmSource) (string, error) {
	if h.Repository == "" {
		return r.localChart(h.Chart)
	}
	key := h.Repository + "|" + h.Chart + "|" + h.Version
	r.mu.Lock()
	if p, ok := r.charts[key]; ok && h.Version != "" {
		r.mu.Unlock()
		return p, nil
	}
	r.mu.Unlock()

	dir := r.HelmCacheDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "qleet-helm")
	}
	p, err := fetchChart(ctx, chartRef{Repository: h.Repository, Chart: h.Chart, Version: h.Version}, dir)
	if err != nil {
		return "", &FetchError{Err: fmt.Errorf("helm chart %q from %s: %w", h.Chart, h.Repository, err)}
	}
	r.mu.Lock()
	if r.charts == nil {
		r.charts = map[string]string{}
	}
	r.charts[key] = p
	r.mu.Unlock()
	return p, nil
}
