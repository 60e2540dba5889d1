package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// runPods lists the pods of a workload instance in its runtime's cluster. It needs the runtime's
// connection details: the local data dir for local runtimes, or a controller token (the only role that
// reads kubeconfigs) for kubeconfig runtimes.
func runPods(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageError{"usage: qleet pods <workload_instance>"}
	}
	cl, err := newClient()
	if err != nil {
		return err
	}
	inst, err := cl.WorkloadInstances().GetByName(ctx, args[0])
	if err != nil {
		return err
	}
	ids := []string{inst.Spec.RuntimeID}
	if len(inst.Status.Placements) > 0 {
		ids = ids[:0]
		for _, p := range inst.Status.Placements {
			ids = append(ids, p.RuntimeID)
		}
	}
	ns := inst.Status.Namespace
	if ns == "" {
		ns = inst.Spec.Namespace
	}
	conn := kube.NewConnector(kube.ConnectorConfig{LocalDir: filepath.Join(envDefault("data-dir", ".qleet"), "runtimes")})
	defer conn.Close()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "RUNTIME\tNAMESPACE\tNAME\tPHASE\tREADY\tNODE\n")
	for _, id := range ids {
		if err := listPods(ctx, cl, conn, tw, id, ns, inst.ID); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// listPods writes the instance's pods on one runtime.
func listPods(ctx context.Context, cl *client.Client, conn *kube.Connector, tw *tabwriter.Writer, runtimeID, ns, instanceID string) error {
	rt, err := cl.KubernetesRuntimes().Get(ctx, runtimeID)
	if err != nil {
		return err
	}
	if rt.Spec.Provider == client.ProviderKubeconfig && rt.Spec.Kubeconfig == "" {
		return fmt.Errorf("the kubeconfig of kubernetes_runtime %q is returned to the controller role only: "+
			"run qleet pods with QLEET_TOKEN set to a controller token (qleet token create --role controller)", rt.Name)
	}
	kc, err := conn.Connect(ctx, rt)
	if err != nil {
		return err
	}
	pods, err := kc.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "qleetos.io/instance-id=" + instanceID})
	if err != nil {
		return fmt.Errorf("list pods in %s: %w", rt.Status.Endpoint, err)
	}
	for _, p := range pods.Items {
		ready := "false"
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" {
				ready = string(c.Status)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", rt.Name, p.Namespace, p.Name, p.Status.Phase, ready, p.Spec.NodeName)
	}
	if len(pods.Items) == 0 {
		fmt.Fprintf(tw, "%s\t%s\t<no pods>\t\t\t\n", rt.Name, ns)
	}
	return nil
}
