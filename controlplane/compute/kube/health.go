package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/api"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// HealthReport is how a set of applied objects is doing.
type HealthReport struct {
	// Objects has one entry per ref, in order, with its readiness and, when not ready, why.
	Objects []api.AppliedObject
	// Ready is true when every object is ready.
	Ready bool
	// Replicas, ReadyReplicas and AvailableReplicas are summed over Deployments, StatefulSets and
	// DaemonSets (desired, ready and available pods).
	Replicas, ReadyReplicas, AvailableReplicas int32
}

// NotReady returns the first not-ready object, or nil.
func (h *HealthReport) NotReady() *api.AppliedObject {
	for i := range h.Objects {
		if !h.Objects[i].Ready {
			return &h.Objects[i]
		}
	}
	return nil
}

// Health reads the applied objects and reports their readiness:
//   - a Deployment is ready when its controller observed its generation and all desired replicas are
//     updated and available, with no old replicas left;
//   - a StatefulSet when all replicas are updated and ready; a DaemonSet when every scheduled pod is
//     updated and available;
//   - a Job unless it failed (a Job that runs or completed is ready);
//   - any other object (Services, including LoadBalancers without an ingress yet, HPAs, ConfigMaps,
//     custom resources) when it exists.
//
// For a workload that is not ready, the message adds the pod-level cause when there is one: the
// scheduler's message for an unschedulable pod ("0/3 nodes are available: 3 Insufficient cpu."), or a
// container waiting in CrashLoopBackOff, ImagePullBackOff, ErrImagePull and the like. Errors reading an
// object make it not ready, with the error as its message.
func Health(ctx context.Context, cl *Cluster, refs []AppliedRef) HealthReport {
	return HealthWith(ctx, cl, refs, HealthOptions{})
}

// HealthOptions tune HealthWith.
type HealthOptions struct {
	// AssumeExist takes objects whose readiness is their existence (everything but Deployments,
	// StatefulSets, DaemonSets and Jobs) as ready without reading them: use it right after applying
	// them, to save a request per object.
	AssumeExist bool
	// Cached reads workloads and their pods from the cluster's Cache where it holds them at (or after)
	// the generation in the ref, and from the API server otherwise. The agent's notifications come
	// from the same cache, so a reconcile they trigger sees what triggered it.
	Cached bool
	// CachedOnly reads workloads only from the cache: one the cache does not hold at the ref's
	// generation yet is not ready ("not in the cache yet"), and the API server is not asked. Use it to
	// re-read health on every change the cache sees (Cache.Changed) without a request each time.
	CachedOnly bool
}

// HasStatus reports whether Health judges objects of this kind by their status rather than by their
// existence.
func HasStatus(gk schema.GroupKind) bool {
	switch gk {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, schema.GroupKind{Group: "batch", Kind: "Job"}:
		return true
	}
	return false
}

// HealthWith is Health with options.
func HealthWith(ctx context.Context, cl *Cluster, refs []AppliedRef, opts HealthOptions) HealthReport {
	rep := HealthReport{Ready: true, Objects: make([]api.AppliedObject, 0, len(refs))}
	for _, r := range refs {
		obj := api.AppliedObject{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
		if opts.AssumeExist && !HasStatus(r.GroupKind()) {
			obj.Ready = true
			rep.Objects = append(rep.Objects, obj)
			continue
		}
		mode := readLive
		switch {
		case opts.CachedOnly:
			mode = readCacheOnly
		case opts.Cached:
			mode = readCached
		}
		ready, msg := objectHealth(ctx, cl, r, mode, &rep)
		obj.Ready, obj.Message = ready, msg
		rep.Ready = rep.Ready && ready
		rep.Objects = append(rep.Objects, obj)
	}
	return rep
}

// readMode says where health reads workloads from.
type readMode int

const (
	readLive      readMode = iota // the API server
	readCached                    // the cache when it holds the ref's generation, else the API server
	readCacheOnly                 // the cache only
)

// errNotCachedYet says the cache does not hold a workload at the generation just applied.
var errNotCachedYet = errors.New("not in the cache yet")

func objectHealth(ctx context.Context, cl *Cluster, r AppliedRef, mode readMode, rep *HealthReport) (bool, string) {
	cached := mode != readLive
	gk := r.GroupKind()
	opts := metav1.GetOptions{}
	switch gk {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		d, err := read(ctx, cl, r, mode, func() (*appsv1.Deployment, error) {
			return cl.Clientset.AppsV1().Deployments(r.Namespace).Get(ctx, r.Name, opts)
		})
		if err != nil {
			return false, readError(err)
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		rep.Replicas += want
		rep.ReadyReplicas += d.Status.ReadyReplicas
		rep.AvailableReplicas += d.Status.AvailableReplicas
		ready, msg := deploymentReady(d, want)
		if !ready {
			msg = withPodCause(ctx, cl, cached, r.Namespace, d.Spec.Selector, msg)
		}
		return ready, msg
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		s, err := read(ctx, cl, r, mode, func() (*appsv1.StatefulSet, error) {
			return cl.Clientset.AppsV1().StatefulSets(r.Namespace).Get(ctx, r.Name, opts)
		})
		if err != nil {
			return false, readError(err)
		}
		want := int32(1)
		if s.Spec.Replicas != nil {
			want = *s.Spec.Replicas
		}
		rep.Replicas += want
		rep.ReadyReplicas += s.Status.ReadyReplicas
		rep.AvailableReplicas += s.Status.AvailableReplicas
		ready, msg := statefulSetReady(s, want)
		if !ready {
			msg = withPodCause(ctx, cl, cached, r.Namespace, s.Spec.Selector, msg)
		}
		return ready, msg
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		ds, err := read(ctx, cl, r, mode, func() (*appsv1.DaemonSet, error) {
			return cl.Clientset.AppsV1().DaemonSets(r.Namespace).Get(ctx, r.Name, opts)
		})
		if err != nil {
			return false, readError(err)
		}
		rep.Replicas += ds.Status.DesiredNumberScheduled
		rep.ReadyReplicas += ds.Status.NumberReady
		rep.AvailableReplicas += ds.Status.NumberAvailable
		ready, msg := daemonSetReady(ds)
		if !ready {
			msg = withPodCause(ctx, cl, cached, r.Namespace, ds.Spec.Selector, msg)
		}
		return ready, msg
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		j, err := read(ctx, cl, r, mode, func() (*batchv1.Job, error) {
			return cl.Clientset.BatchV1().Jobs(r.Namespace).Get(ctx, r.Name, opts)
		})
		if err != nil {
			return false, readError(err)
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return false, fmt.Sprintf("failed: %s: %s", c.Reason, c.Message)
			}
		}
		return true, ""
	}
	ri, _, err := resourceFor(cl, schema.FromAPIVersionAndKind(r.APIVersion, r.Kind), r.Namespace)
	if err != nil {
		return false, err.Error()
	}
	if _, err := ri.Get(ctx, r.Name, opts); err != nil {
		return false, readError(err)
	}
	return true, ""
}

// read returns the cached object when asked to and the cache holds it at or after the ref's generation
// (a cache that lags an apply just made must not report the previous rollout's health), else get's.
func read[T metav1.Object](ctx context.Context, cl *Cluster, r AppliedRef, mode readMode, get func() (T, error)) (T, error) {
	if mode != readLive {
		if obj, err := cl.Cache().object(ctx, r); err == nil && obj != nil {
			if t, ok := obj.(T); ok && t.GetGeneration() >= r.Generation {
				return t, nil
			}
		}
	}
	if mode == readCacheOnly {
		var zero T
		return zero, errNotCachedYet
	}
	return get()
}

func readError(err error) string {
	if apierrors.IsNotFound(err) {
		return "not found"
	}
	return err.Error()
}

// ProgressDeadlineExceeded is in the health message of a Deployment whose progress deadline passed.
const ProgressDeadlineExceeded = "exceeded its progress deadline"

// deploymentReady follows `kubectl rollout status`.
func deploymentReady(d *appsv1.Deployment, want int32) (bool, string) {
	st := d.Status
	if d.Generation > st.ObservedGeneration {
		return false, "waiting for the deployment controller to observe the new generation"
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return false, fmt.Sprintf("rollout %s: %s", ProgressDeadlineExceeded, c.Message)
		}
	}
	switch {
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas updated, %d available", st.UpdatedReplicas, want, st.AvailableReplicas)
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < st.UpdatedReplicas || st.AvailableReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, want)
	}
	return true, ""
}

func statefulSetReady(s *appsv1.StatefulSet, want int32) (bool, string) {
	st := s.Status
	if s.Generation > st.ObservedGeneration {
		return false, "waiting for the statefulset controller to observe the new generation"
	}
	switch {
	case st.ReadyReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, want)
	case s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && st.UpdatedReplicas < want &&
		(s.Spec.UpdateStrategy.RollingUpdate == nil || s.Spec.UpdateStrategy.RollingUpdate.Partition == nil || *s.Spec.UpdateStrategy.RollingUpdate.Partition == 0):
		return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want)
	case st.AvailableReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, want)
	}
	return true, ""
}

func daemonSetReady(ds *appsv1.DaemonSet) (bool, string) {
	st := ds.Status
	if ds.Generation > st.ObservedGeneration {
		return false, "waiting for the daemonset controller to observe the new generation"
	}
	switch {
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
		return false, fmt.Sprintf("%d of %d pods updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)
	case st.NumberAvailable < st.DesiredNumberScheduled:
		return false, fmt.Sprintf("%d of %d pods available", st.NumberAvailable, st.DesiredNumberScheduled)
	}
	return true, ""
}

// withPodCause appends the most telling pod problem among the workload's pods to msg.
func withPodCause(ctx context.Context, cl *Cluster, cached bool, namespace string, sel *metav1.LabelSelector, msg string) string {
	if sel == nil {
		return msg
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return msg
	}
	var pods []corev1.Pod
	var cp []*corev1.Pod
	if cached {
		cp, err = cl.Cache().Pods(ctx, namespace, s)
	}
	if cached && err == nil {
		pods = make([]corev1.Pod, len(cp))
		for i, p := range cp {
			pods[i] = *p
		}
	} else {
		list, err := cl.Clientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
		if err != nil {
			return msg
		}
		pods = list.Items
	}
	if cause := PodCause(pods); cause != "" {
		return msg + "; " + cause
	}
	return msg
}

// podProblemReasons are container waiting reasons worth reporting, most telling first.
var podProblemReasons = []string{
	"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError",
	"CreateContainerError", "RunContainerError",
}

// PodCause returns the most telling problem among pods, e.g. `pod web-5d9c-x7k: Unschedulable: 0/3
// nodes are available: 3 Insufficient cpu.` or `pod web-5d9c-x7k: container app: CrashLoopBackOff:
// ...`, or "" when no pod has one. Pods are considered in name order, so the answer is stable.
func PodCause(pods []corev1.Pod) string {
	sorted := make([]*corev1.Pod, len(pods))
	for i := range pods {
		sorted[i] = &pods[i]
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, reason := range podProblemReasons {
		for _, p := range sorted {
			for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				if w := cs.State.Waiting; w != nil && w.Reason == reason {
					return strings.TrimSuffix(fmt.Sprintf("pod %s: container %s: %s: %s", p.Name, cs.Name, w.Reason, w.Message), ": ")
				}
			}
		}
	}
	for _, p := range sorted {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return fmt.Sprintf("pod %s: Unschedulable: %s", p.Name, c.Message)
			}
		}
	}
	for _, p := range sorted {
		if p.Status.Phase == corev1.PodFailed {
			return strings.TrimSuffix(fmt.Sprintf("pod %s: Failed: %s: %s", p.Name, p.Status.Reason, p.Status.Message), ": ")
		}
	}
	return ""
}
