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
// metrics API (metrics.k8s.io/v1beta1 pods, which the HorizontalPodAutoscaler controller reads) as a
// custom resource that it keeps filled with simulated usage. A pod's CPU usage is the annotation
// kubesim.qleet.io/cpu on the pod, or on the Deployment that owns it ("400m": the load a test or a demo
// puts on it), else a tenth of its CPU request.

// AnnotationCPU sets the simulated CPU usage of a pod, or of every pod of a Deployment.
const AnnotationCPU = "kubesim.qleet.io/cpu"

var (
	podMetrics = schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}
	crds       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// metricsServerSelectors find an installed metrics-server (upstream's, or QleetOS's local chart).
var metricsServerSelectors = []string{"app.kubernetes.io/name=metrics-server", "app.kubernetes.io/name=qleet-metrics-server"}

// metricsEvery is how often usage is written.
const metricsEvery = 5 * time.Second

// syncMetrics writes the pods' simulated usage while a metrics-server is installed.
func syncMetrics(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	installed := false
	for _, sel := range metricsServerSelectors {
		deps, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return err
		}
		installed = installed || len(deps.Items) > 0
	}
	if !installed {
		return nil
	}
	if err := ensureMetricsAPI(ctx, dyn); err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	deployments := map[string]*appsv1.Deployment{}
	now := time.Now().UTC().Format(time.RFC3339)
	live := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		live[p.Namespace+"/"+p.Name] = true
		total, err := podUsage(ctx, cs, p, deployments)
		if err != nil {
			return err
		}
		if err := writePodMetrics(ctx, dyn, p, total, now); err != nil {
			return fmt.Errorf("pod metrics %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	list, err := dyn.Resource(podMetrics).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, m := range list.Items {
		if !live[m.GetNamespace()+"/"+m.GetName()] {
			if err := dyn.Resource(podMetrics).Namespace(m.GetNamespace()).Delete(ctx, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
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
func writePodMetrics(ctx context.Context, dyn dynamic.Interface, p *corev1.Pod, total resource.Quantity, now string) error {
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
	labels := map[string]any{}
	for k, v := range p.Labels {
		labels[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
		"metadata":  map[string]any{"name": p.Name, "namespace": p.Namespace, "labels": labels},
		"timestamp": now, "window": "1s", "containers": containers,
	}}
	cur, err := dyn.Resource(podMetrics).Namespace(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = dyn.Resource(podMetrics).Namespace(p.Namespace).Create(ctx, u, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	u.SetResourceVersion(cur.GetResourceVersion())
	_, err = dyn.Resource(podMetrics).Namespace(p.Namespace).Update(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// ensureMetricsAPI serves metrics.k8s.io/v1beta1 pods as a custom resource (the group is protected, so
// the definition says it is kubesim's simulation, not an approved API).
func ensureMetricsAPI(ctx context.Context, dyn dynamic.Interface) error {
	const name = "pods.metrics.k8s.io"
	if _, err := dyn.Resource(crds).Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name, "annotations": map[string]any{
			"api-approved.kubernetes.io": "unapproved, simulated by kubesim in place of metrics-server",
		}},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "scope": "Namespaced",
			"names": map[string]any{"kind": "PodMetrics", "listKind": "PodMetricsList", "plural": "pods", "singular": "podmetrics"},
			"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	_, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Wait until the API serves it.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := dyn.Resource(podMetrics).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			return nil
		} else if !apierrors.IsNotFound(err) && !strings.Contains(err.Error(), "could not find") {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("the metrics API was not served within 30s")
}
