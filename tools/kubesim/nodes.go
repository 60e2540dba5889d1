package main

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	labelManaged   = "kubesim.qleet.io/node"
	labelRegion    = "topology.kubernetes.io/region"
	labelZone      = "topology.kubernetes.io/zone"
	kubeletVersion = "v1.31.4"
)

// nodeSpec is what kubesim registers for each fake node.
type nodeSpec struct {
	Name, Region, Zone string
}

// planNodes names n nodes and spreads them over zones round-robin.
func planNodes(cluster, region string, zones []string, n int) []nodeSpec {
	out := make([]nodeSpec, n)
	for i := range out {
		out[i] = nodeSpec{
			Name:   fmt.Sprintf("%s-node-%d", cluster, i),
			Region: region,
			Zone:   zones[i%len(zones)],
		}
	}
	return out
}

// ensureNodes creates the planned nodes, updates the labels of existing
// ones, and deletes nodes kubesim made earlier that are no longer planned
// (after a restart with fewer --nodes). kwok then keeps them Ready.
func ensureNodes(ctx context.Context, cs kubernetes.Interface, plan []nodeSpec) error {
	want := map[string]bool{}
	for _, spec := range plan {
		want[spec.Name] = true
		if err := ensureNode(ctx, cs, spec); err != nil {
			return fmt.Errorf("node %s: %w", spec.Name, err)
		}
	}
	existing, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labelManaged})
	if err != nil {
		return err
	}
	for _, n := range existing.Items {
		if !want[n.Name] {
			if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

func ensureNode(ctx context.Context, cs kubernetes.Interface, spec nodeSpec) error {
	labels := map[string]string{
		labelManaged:                       "true",
		labelRegion:                        spec.Region,
		labelZone:                          spec.Zone,
		"kubernetes.io/hostname":           spec.Name,
		"kubernetes.io/os":                 "linux",
		"kubernetes.io/arch":               "amd64",
		"node.kubernetes.io/instance-type": "kubesim",
		"type":                             "kwok",
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, spec.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cs.CoreV1().Nodes().Create(ctx, newNode(spec, labels), metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	changed := false
	for k, v := range labels {
		if node.Labels[k] != v {
			node.Labels[k] = v
			changed = true
		}
	}
	if changed {
		_, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	}
	return err
}

func newNode(spec nodeSpec, labels map[string]string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse(strconv.Itoa(1000)),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.Name,
			Labels:      labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:            "amd64",
				OperatingSystem:         "linux",
				KubeletVersion:          kubeletVersion,
				KubeProxyVersion:        kubeletVersion,
				OSImage:                 "kubesim (kwok)",
				ContainerRuntimeVersion: "kwok://v0.6.1",
			},
		},
	}
}

// nodesReady reports nil when every planned node has Ready=True.
func nodesReady(ctx context.Context, cs kubernetes.Interface, plan []nodeSpec) error {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labelManaged})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready[n.Name] = true
			}
		}
	}
	for _, spec := range plan {
		if !ready[spec.Name] {
			return fmt.Errorf("node %s is not Ready yet", spec.Name)
		}
	}
	return nil
}
