package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// max_nodes), and removes nodes it added once they have run no pods (but DaemonSets') for delay, down
// to min_nodes. Nodes that kubesim made, or anyone else, are never removed. It returns whether it
// changed the node count.
func (s *nodeScaler) scale(ctx context.Context, cl *kube.Cluster, rt *api.KubernetesRuntime, nodes []corev1.Node, delay time.Duration) (bool, error) {
	pods, err := cl.Clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list pods: %w", err)
	}
	var pending []*corev1.Pod
	busy := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != "" && !ownedByDaemonSet(p) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			busy[p.Spec.NodeName] = true
		}
		if lacksCapacity(p) {
			pending = append(pending, p)
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
	var removed []string
	count := len(nodes)
	for i := range nodes {
		n := &nodes[i]
		key := rt.ID + "/" + n.Name
		if n.Labels[LabelAutoscaled] != "true" || busy[n.Name] || count <= rt.Spec.MinNodes {
			s.setIdle(key, false)
			continue
		}
		if since := s.setIdle(key, true); time.Since(since) < delay {
			continue
		}
		err := cl.Clientset.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return len(removed) > 0, fmt.Errorf("remove idle node %s: %w", n.Name, err)
		}
		s.setIdle(key, false)
		removed = append(removed, n.Name)
		count--
	}
	if len(removed) == 0 {
		return false, nil
	}
	rt.Status.NodesRemoved += len(removed)
	reconcile.Eventf(ctx, api.EventNormal, ReasonNodesRemoved, "removed %d idle node(s) (%s), idle for %s: %d left, at least %d",
		len(removed), strings.Join(removed, ", "), delay, count, rt.Spec.MinNodes)
	return true, nil
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
	var cpu, mem resource.Quantity
	for _, p := range pending {
		for _, c := range p.Spec.Containers {
			cpu.Add(c.Resources.Requests[corev1.ResourceCPU])
			mem.Add(c.Resources.Requests[corev1.ResourceMemory])
		}
	}
	need := 1
	alloc := template.Status.Allocatable
	if a := alloc.Cpu().MilliValue(); a > 0 {
		need = max(need, int((cpu.MilliValue()+a-1)/a))
	}
	if a := alloc.Memory().Value(); a > 0 {
		need = max(need, int((mem.Value()+a-1)/a))
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
