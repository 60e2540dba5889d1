package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// Node autoscaling of local runtimes.
const (
	// LabelAutoscaled marks the nodes that node autoscaling added; only those are ever removed.
	LabelAutoscaled = "qleet.io/autoscaled"
	// ReasonNodesAdded is the event reason of nodes added for unschedulable pods.
	ReasonNodesAdded = "NodesAdded"
	// ReasonNodesRemoved is the event reason of idle nodes removed.
	ReasonNodesRemoved = "NodesRemoved"
)

// nodeScaler keeps, per runtime and node, since when an added node has been idle.
type nodeScaler struct {
	mu   sync.Mutex
	idle map[string]time.Time // runtime id + "/" + node name -> idle since
}

// scale adds nodes to a local runtime while pods cannot be scheduled for lack of capacity (up to
// max_nodes), and removes nodes it added once, for delay, they have run no pods (but DaemonSets') or
// only pods of workloads QleetOS applied, which their controller would recreate and which fit on the
// nodes that stay, down to min_nodes. A
// node whose pods must move is cordoned and its pods evicted (PodDisruptionBudgets are respected) before
// it goes, as the cluster autoscaler drains an underused node. Nodes that kubesim made, or anyone else,
// are never removed. It returns whether it changed the node count.
func (s *nodeScaler) scale(ctx context.Context, cl *kube.Cluster, rt *api.KubernetesRuntime, nodes []corev1.Node, delay time.Duration) (bool, error) {
	pods, err := cl.Clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list pods: %w", err)
	}
	var pending []*corev1.Pod
	onNode := map[string][]*corev1.Pod{} // the pods that would have to move, by node
	used := map[string]corev1.ResourceList{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if lacksCapacity(p) {
			pending = append(pending, p)
		}
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		used[p.Spec.NodeName] = addRequests(used[p.Spec.NodeName], p)
		if !ownedByDaemonSet(p) {
			onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], p)
		}
	}
	if len(pending) > 0 && len(nodes) < rt.Spec.MaxNodes && len(nodes) > 0 {
		add := min(nodesFor(pending, &nodes[0]), rt.Spec.MaxNodes-len(nodes))
		for i := range add {
			if err := s.addNode(ctx, cl, rt, &nodes[0], len(nodes)+i); err != nil {
				return i > 0, err
			}
		}
		rt.Status.NodesAdded += add
		reconcile.Eventf(ctx, api.EventNormal, ReasonNodesAdded, "added %d node(s) for %d unschedulable pod(s) (%s): %d of at most %d",
			add, len(pending), pending[0].Namespace+"/"+pending[0].Name, len(nodes)+add, rt.Spec.MaxNodes)
		return true, nil
	}
	if len(pending) > 0 {
		return false, nil // at max_nodes: the pods wait, and the instance's stall says why
	}
	// Free capacity of the nodes that could take moved pods; a node chosen to go stops being one.
	free := map[string]corev1.ResourceList{}
	for i := range nodes {
		if n := &nodes[i]; schedulable(n) {
			free[n.Name] = subtract(n.Status.Allocatable, used[n.Name])
		}
	}
	// Like the cluster autoscaler: empty nodes go together, at most one node whose pods must move goes
	// per pass, and a node that takes moved pods stays this pass.
	var removed, moved []string
	kept := map[string]bool{}
	count := len(nodes)
	for i := range nodes {
		n := &nodes[i]
		key := rt.ID + "/" + n.Name
		if n.Labels[LabelAutoscaled] != "true" || count <= rt.Spec.MinNodes {
			s.setIdle(key, false)
			continue
		}
		room, wasFree := free[n.Name]
		delete(free, n.Name)
		ours, err := allManaged(ctx, cl, onNode[n.Name])
		if err != nil {
			return len(removed) > 0, err
		}
		after, targets, fits := place(onNode[n.Name], nodes, free)
		fits = fits && ours
		if !fits {
			s.setIdle(key, false)
		}
		if !fits || kept[n.Name] || (len(onNode[n.Name]) > 0 && len(moved) > 0) || time.Since(s.setIdle(key, true)) < delay {
			if wasFree {
				free[n.Name] = room
			}
			continue
		}
		if err := s.drain(ctx, cl, n, onNode[n.Name]); err != nil {
			s.setIdle(key, false)
			return len(removed) > 0, err
		}
		err = cl.Clientset.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return len(removed) > 0, fmt.Errorf("remove idle node %s: %w", n.Name, err)
		}
		free = after
		for _, t := range targets {
			kept[t] = true
		}
		s.setIdle(key, false)
		removed = append(removed, n.Name)
		for _, p := range onNode[n.Name] {
			moved = append(moved, p.Namespace+"/"+p.Name)
		}
		count--
	}
	if len(removed) == 0 {
		return false, nil
	}
	rt.Status.NodesRemoved += len(removed)
	msg := fmt.Sprintf("removed %d underused node(s) (%s), idle for %s: %d left, at least %d",
		len(removed), strings.Join(removed, ", "), delay, count, rt.Spec.MinNodes)
	if len(moved) > 0 {
		msg += fmt.Sprintf("; evicted %d pod(s) that fit elsewhere (%s)", len(moved), strings.Join(moved, ", "))
	}
	reconcile.Eventf(ctx, api.EventNormal, ReasonNodesRemoved, "%s", msg)
	return true, nil
}

// place fits pods, largest CPU request first, into the free capacity of the nodes in free (first fit,
// honouring node selectors and NoSchedule taints). It returns the capacity left and whether every pod
// fits, and the nodes that take pods. A pod that no controller would recreate, or that asks for
// affinity, never moves.
func place(pods []*corev1.Pod, nodes []corev1.Node, free map[string]corev1.ResourceList) (map[string]corev1.ResourceList, []string, bool) {
	left := make(map[string]corev1.ResourceList, len(free))
	for k, v := range free {
		left[k] = v.DeepCopy()
	}
	var targets []string
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b *corev1.Pod) int {
		ra, rb := addRequests(nil, a), addRequests(nil, b)
		return rb.Cpu().Cmp(*ra.Cpu())
	})
	for _, p := range sorted {
		if metav1.GetControllerOf(p) == nil || p.Spec.Affinity != nil {
			return nil, nil, false
		}
		req := addRequests(nil, p)
		fitted := false
		for i := range nodes {
			n := &nodes[i]
			room, ok := left[n.Name]
			if !ok || !selects(p, n) || !fitsIn(req, room) {
				continue
			}
			left[n.Name] = subtract(room, req)
			targets = append(targets, n.Name)
			fitted = true
			break
		}
		if !fitted {
			return nil, nil, false
		}
	}
	return left, targets, true
}

// allManaged reports whether every pod comes from a workload that QleetOS applied: its controller, or its
// ReplicaSet's Deployment, carries QleetOS's managed-by label. Only those are ever evicted; a pod anyone
// else runs keeps its node.
func allManaged(ctx context.Context, cl *kube.Cluster, pods []*corev1.Pod) (bool, error) {
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		var obj metav1.Object
		var err error
		for hops := 0; ref != nil && hops < 2; hops++ {
			switch ref.Kind {
			case "ReplicaSet":
				obj, err = cl.Clientset.AppsV1().ReplicaSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			case "Deployment":
				obj, err = cl.Clientset.AppsV1().Deployments(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			case "StatefulSet":
				obj, err = cl.Clientset.AppsV1().StatefulSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			default:
				return false, nil
			}
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("read the controller of pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			if obj.GetLabels()[kube.LabelManagedBy] == kube.ManagedByValue {
				break
			}
			ref = metav1.GetControllerOf(obj)
		}
		if obj == nil || obj.GetLabels()[kube.LabelManagedBy] != kube.ManagedByValue {
			return false, nil
		}
	}
	return true, nil
}

// drain cordons node and evicts the pods that must move (through the Eviction API, so that disruption
// budgets hold). A refused eviction uncordons the node again, and the next recheck tries once more.
func (s *nodeScaler) drain(ctx context.Context, cl *kube.Cluster, node *corev1.Node, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	cordon := func(on bool) error {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
		_, err := cl.Clientset.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	if err := cordon(true); err != nil {
		return fmt.Errorf("cordon underused node %s: %w", node.Name, err)
	}
	for _, p := range pods {
		err := cl.Clientset.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		if err != nil && !apierrors.IsNotFound(err) {
			_ = cordon(false)
			return fmt.Errorf("evict %s/%s from underused node %s: %w", p.Namespace, p.Name, node.Name, err)
		}
	}
	return nil
}

func schedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable || n.DeletionTimestamp != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	return true
}

// selects reports whether pod's node selector matches node.
func selects(p *corev1.Pod, n *corev1.Node) bool {
	for k, v := range p.Spec.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	return true
}

// addRequests adds the CPU and memory requests of p's containers to into.
func addRequests(into corev1.ResourceList, p *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourceCPU: into.Cpu().DeepCopy(), corev1.ResourceMemory: into.Memory().DeepCopy()}
	for _, c := range p.Spec.Containers {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			q := out[r]
			q.Add(c.Resources.Requests[r])
			out[r] = q
		}
	}
	return out
}

func subtract(have, take corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourceCPU: have.Cpu().DeepCopy(), corev1.ResourceMemory: have.Memory().DeepCopy()}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q := out[r]
		q.Sub(take[r])
		out[r] = q
	}
	return out
}

func fitsIn(req, room corev1.ResourceList) bool {
	return req.Cpu().Cmp(*room.Cpu()) <= 0 && req.Memory().Cmp(*room.Memory()) <= 0
}

// lacksCapacity reports whether the scheduler could not place a pod for lack of resources.
func lacksCapacity(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return strings.Contains(c.Message, "Insufficient") || strings.Contains(c.Message, "Too many pods")
		}
	}
	return false
}

// nodesFor estimates how many nodes like template the pending pods need, by their CPU and memory
// requests (at least one).
func nodesFor(pending []*corev1.Pod, template *corev1.Node) int {
	var req corev1.ResourceList
	for _, p := range pending {
		req = addRequests(req, p)
	}
	need := 1
	alloc := template.Status.Allocatable
	if a := alloc.Cpu().MilliValue(); a > 0 {
		need = max(need, int((req.Cpu().MilliValue()+a-1)/a))
	}
	if a := alloc.Memory().Value(); a > 0 {
		need = max(need, int((req.Memory().Value()+a-1)/a))
	}
	return need
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// addNode registers a simulated node shaped like template (kwok makes it Ready).
func (s *nodeScaler) addNode(ctx context.Context, cl *kube.Cluster, rt *api.KubernetesRuntime, template *corev1.Node, index int) error {
	labels := map[string]string{}
	for k, v := range template.Labels {
		if strings.HasPrefix(k, "kubesim.") {
			continue // kubesim's own nodes only: it prunes those it did not plan
		}
		labels[k] = v
	}
	var name string
	for i := index; ; i++ {
		name = fmt.Sprintf("%s-auto-%d", rt.Name, i)
		if _, err := cl.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		} else if err != nil {
			return fmt.Errorf("add node: %w", err)
		}
	}
	labels[LabelAutoscaled] = "true"
	labels[corev1.LabelHostname] = name
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Capacity: template.Status.Capacity, Allocatable: template.Status.Allocatable,
			NodeInfo: template.Status.NodeInfo},
	}
	if _, err := cl.Clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("add node %s: %w", name, err)
	}
	return nil
}

func (s *nodeScaler) setIdle(key string, idle bool) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !idle {
		delete(s.idle, key)
		return time.Time{}
	}
	if s.idle == nil {
		s.idle = map[string]time.Time{}
	}
	since, ok := s.idle[key]
	if !ok {
		since = time.Now()
		s.idle[key] = since
	}
	return since
}
