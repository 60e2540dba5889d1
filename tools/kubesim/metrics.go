package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// kubesim plays metrics-server: once a metrics-server Deployment is installed, it serves the resource
// metrics API (metrics.k8s.io/v1beta1 pods, which the HorizontalPodAutoscaler controller reads, and
// nodes, which `kubectl top nodes` reads) as custom resources that it keeps filled with simulated usage.
// A pod's CPU usage is the annotation kubesim.qleet.io/cpu on the pod, or on the Deployment that owns it
// ("400m": the load a test or a demo puts on it), else a tenth of its CPU request. A node's usage is the
// sum of its pods'. When the metrics-server goes, so do the API and its samples.
//
// As metrics-server's, a pod's first sample covers a whole window after the pod became Ready, so the
// autoscaler never sees a sample it must ignore ("pods might be unready"); samples are written within a
// second of that, again when the usage changes, and every metricsRefresh.

// AnnotationCPU sets the simulated CPU usage of a pod, or of every pod of a Deployment.
const AnnotationCPU = "kubesim.qleet.io/cpu"

var (
	podMetrics  = schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}
	nodeMetrics = schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "nodes"}
	crds        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// metricsServerSelectors find an installed metrics-server (upstream's, or QleetOS's local chart).
var metricsServerSelectors = []string{"app.kubernetes.io/name=metrics-server", "app.kubernetes.io/name=qleet-metrics-server"}

const (
	// metricsEvery is how often kubesim looks for new pods, changed usage and an installed metrics-server.
	metricsEvery = time.Second
	// metricsRefresh is how often an unchanged sample is taken again (metrics-server's scrape interval).
	metricsRefresh = 15 * time.Second
	// metricsWindow is the window a sample covers.
	metricsWindow = time.Second
)

// sample is what kubesim last wrote for a pod or node.
type sample struct {
	usage string
	at    time.Time
}

// metricsWriter writes simulated usage while a metrics-server is installed.
type metricsWriter struct {
	served  bool              // the API is served (kubesim made the definitions)
	written map[string]sample // "pods/<ns>/<name>" or "nodes/<name>" -> last sample written
}

// sync writes the pods' and nodes' simulated usage while a metrics-server is installed, and removes the
// API once it is not.
func (w *metricsWriter) sync(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	installed := false
	for _, sel := range metricsServerSelectors {
		deps, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: "0"})
		if err != nil {
			return err
		}
		installed = installed || len(deps.Items) > 0
	}
	if !installed {
		if w.served || w.written == nil {
			// Also at start: a definition left from an earlier run on this data dir goes.
			if err := removeMetricsAPI(ctx, dyn); err != nil {
				return err
			}
			w.served, w.written = false, map[string]sample{}
		}
		return nil
	}
	if !w.served {
		if err := ensureMetricsAPI(ctx, dyn); err != nil {
			return err
		}
		w.served, w.written = true, map[string]sample{}
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	deployments := map[string]*appsv1.Deployment{}
	now := time.Now()
	live := map[string]bool{}
	nodes := map[string]*resource.Quantity{}
	for i := range pods.Items {
		p := &pods.Items[i]
		ready := readySince(p)
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || ready.IsZero() || now.Before(ready.Add(metricsWindow)) {
			continue
		}
		key := "pods/" + p.Namespace + "/" + p.Name
		live[key] = true
		total, err := podUsage(ctx, cs, p, deployments)
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			if nodes[p.Spec.NodeName] == nil {
				nodes[p.Spec.NodeName] = resource.NewMilliQuantity(0, resource.DecimalSI)
			}
			nodes[p.Spec.NodeName].Add(total)
		}
		if last, ok := w.written[key]; ok && last.usage == total.String() && now.Sub(last.at) < metricsRefresh {
			continue
		}
		if err := writePodMetrics(ctx, dyn, p, total, now); err != nil {
			return fmt.Errorf("pod metrics %s/%s: %w", p.Namespace, p.Name, err)
		}
		w.written[key] = sample{usage: total.String(), at: now}
	}
	nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	for i := range nl.Items {
		n := &nl.Items[i]
		key := "nodes/" + n.Name
		live[key] = true
		usage := nodes[n.Name]
		if usage == nil {
			usage = resource.NewMilliQuantity(0, resource.DecimalSI)
		}
		if last, ok := w.written[key]; ok && last.usage == usage.String() && now.Sub(last.at) < metricsRefresh {
			continue
		}
		if err := writeNodeMetrics(ctx, dyn, n, *usage, now); err != nil {
			return fmt.Errorf("node metrics %s: %w", n.Name, err)
		}
		w.written[key] = sample{usage: usage.String(), at: now}
	}
	for key := range w.written {
		if !live[key] {
			delete(w.written, key)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{podMetrics, nodeMetrics} {
		list, err := dyn.Resource(gvr).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, m := range list.Items {
			key := gvr.Resource + "/" + m.GetName()
			if m.GetNamespace() != "" {
				key = gvr.Resource + "/" + m.GetNamespace() + "/" + m.GetName()
			}
			if live[key] {
				continue
			}
			if err := dyn.Resource(gvr).Namespace(m.GetNamespace()).Delete(ctx, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// readySince is when the pod last became Ready, or zero while it is not.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// podUsage is a pod's simulated CPU usage: its annotation, its Deployment's, or a tenth of its requests.
func podUsage(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, deployments map[string]*appsv1.Deployment) (resource.Quantity, error) {
	if v, ok := p.Annotations[AnnotationCPU]; ok {
		return resource.ParseQuantity(v)
	}
	if d, err := owningDeployment(ctx, cs, p, deployments); err != nil {
		return resource.Quantity{}, err
	} else if d != nil {
		if v, ok := d.Annotations[AnnotationCPU]; ok {
			return resource.ParseQuantity(v)
		}
	}
	var req int64
	for _, c := range p.Spec.Containers {
		req += c.Resources.Requests.Cpu().MilliValue()
	}
	return *resource.NewMilliQuantity(max(req/10, 1), resource.DecimalSI), nil
}

func owningDeployment(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, cache map[string]*appsv1.Deployment) (*appsv1.Deployment, error) {
	for _, o := range p.OwnerReferences {
		if o.Kind != "ReplicaSet" {
			continue
		}
		rs, err := cs.AppsV1().ReplicaSets(p.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, ro := range rs.OwnerReferences {
			if ro.Kind != "Deployment" {
				continue
			}
			key := p.Namespace + "/" + ro.Name
			if d, ok := cache[key]; ok {
				return d, nil
			}
			d, err := cs.AppsV1().Deployments(p.Namespace).Get(ctx, ro.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			cache[key] = d
			return d, nil
		}
	}
	return nil, nil
}

// writePodMetrics writes one PodMetrics, splitting the pod's usage evenly over its containers.
func writePodMetrics(ctx context.Context, dyn dynamic.Interface, p *corev1.Pod, total resource.Quantity, now time.Time) error {
	n := int64(max(len(p.Spec.Containers), 1))
	var containers []any
	for _, c := range p.Spec.Containers {
		mem := c.Resources.Requests.Memory().Value()
		if mem == 0 {
			mem = 16 << 20
		}
		containers = append(containers, map[string]any{"name": c.Name, "usage": map[string]any{
			"cpu":    resource.NewMilliQuantity(total.MilliValue()/n, resource.DecimalSI).String(),
			"memory": resource.NewQuantity(mem, resource.BinarySI).String(),
		}})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
		"metadata":  map[string]any{"name": p.Name, "namespace": p.Namespace, "labels": toAny(p.Labels)},
		"timestamp": stamp(now), "window": metricsWindow.String(), "containers": containers,
	}}
	return put(ctx, dyn.Resource(podMetrics).Namespace(p.Namespace), u)
}

// writeNodeMetrics writes one NodeMetrics: the node's pods' CPU usage, and a sixteenth of its memory.
func writeNodeMetrics(ctx context.Context, dyn dynamic.Interface, n *corev1.Node, cpu resource.Quantity, now time.Time) error {
	mem := resource.NewQuantity(n.Status.Capacity.Memory().Value()/16, resource.BinarySI)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
		"metadata":  map[string]any{"name": n.Name, "labels": toAny(n.Labels)},
		"timestamp": stamp(now), "window": metricsWindow.String(),
		"usage": map[string]any{"cpu": cpu.String(), "memory": mem.String()},
	}}
	return put(ctx, dyn.Resource(nodeMetrics), u)
}

// stamp is a sample's timestamp: the API's precision is a second, so the time is rounded down (a sample
// is then never dated after the moment it was taken).
func stamp(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// put creates or replaces an object.
func put(ctx context.Context, res dynamic.ResourceInterface, u *unstructured.Unstructured) error {
	cur, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = res.Create(ctx, u, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	u.SetResourceVersion(cur.GetResourceVersion())
	_, err = res.Update(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// metricsDefinitions are the custom resources that serve metrics.k8s.io/v1beta1 (the group is
// protected, so each definition says it is kubesim's simulation, not an approved API).
func metricsDefinitions() []*unstructured.Unstructured {
	def := func(plural, kind, scope string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": plural + ".metrics.k8s.io", "annotations": map[string]any{
				"api-approved.kubernetes.io": "unapproved, simulated by kubesim in place of metrics-server",
			}},
			"spec": map[string]any{
				"group": "metrics.k8s.io", "scope": scope,
				"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
				"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
	}
	return []*unstructured.Unstructured{def("pods", "PodMetrics", "Namespaced"), def("nodes", "NodeMetrics", "Cluster")}
}

// ensureMetricsAPI serves metrics.k8s.io/v1beta1 pods and nodes, and waits until the API serves them.
func ensureMetricsAPI(ctx context.Context, dyn dynamic.Interface) error {
	for _, crd := range metricsDefinitions() {
		if _, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, gvr := range []schema.GroupVersionResource{podMetrics, nodeMetrics} {
		for {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if err == nil {
				break
			}
			if !apierrors.IsNotFound(err) && !strings.Contains(err.Error(), "could not find") {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the metrics API (%s) was not served within 30s", gvr.Resource)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// removeMetricsAPI stops serving the metrics API (and so drops every sample), as removing
// metrics-server does.
func removeMetricsAPI(ctx context.Context, dyn dynamic.Interface) error {
	for _, crd := range metricsDefinitions() {
		if err := dyn.Resource(crds).Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
