package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// podRow is one pod of an instance, as `qleet pods` shows it.
type podRow struct {
	// Runtime is the kubernetes_runtime the pod runs on.
	Runtime string `json:"runtime"`
	// Namespace and Name identify the pod in its cluster.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Phase is the pod's phase, e.g. Running.
	Phase string `json:"phase"`
	// Ready is ready containers over containers, e.g. 1/1.
	Ready string `json:"ready"`
	// Images are the images of the pod's containers.
	Images []string `json:"images"`
	// Node is the node the pod was scheduled on.
	Node string `json:"node"`
	// IP is the pod's IP address.
	IP string `json:"ip,omitempty"`
	// Restarts counts container restarts.
	Restarts int32 `json:"restarts"`
	// CreatedAt is when the pod was created.
	CreatedAt time.Time `json:"created_at"`
}

func (q *cli) podsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "pods INSTANCE",
		Short: "List the pods of a workload instance in its clusters, with their images and nodes",
		Long: `pods lists the pods of a workload instance on every runtime it is placed on. It reads the clusters
directly: local runtimes through the data dir (--data-dir), kubeconfig runtimes with a controller token
(the only role that reads kubeconfigs). On kubesim clusters pods are simulated: they are scheduled and
become Running and Ready, but no container runs.`,
		Example: `  qleet pods web
  qleet pods web -o wide`,
		Args: exactArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return q.completeNames(cmd.Context(), api.KindWorkloadInstance, toComplete), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			rows, err := q.pods(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if structured(output) {
				return printStructured(cmd.OutOrStdout(), output, rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			if output == outWide {
				fmt.Fprintln(tw, "RUNTIME\tNAMESPACE\tNAME\tPHASE\tREADY\tIMAGE\tNODE\tIP\tRESTARTS\tAGE")
			} else {
				fmt.Fprintln(tw, "RUNTIME\tNAMESPACE\tNAME\tPHASE\tREADY\tIMAGE\tNODE")
			}
			for _, r := range rows {
				if r.Name == "" {
					fmt.Fprintf(tw, "%s\t%s\t<no pods>\t\t\t\t\n", r.Runtime, r.Namespace)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Runtime, r.Namespace, r.Name, r.Phase, r.Ready,
					strings.Join(r.Images, ","), orDash(r.Node))
				if output == outWide {
					fmt.Fprintf(tw, "\t%s\t%d\t%s", orDash(r.IP), r.Restarts, age(r.CreatedAt))
				}
				fmt.Fprintln(tw)
			}
			return tw.Flush()
		},
	}
	addOutputFlag(cmd, &output)
	q.addConnFlags(cmd.Flags())
	return cmd
}

// pods lists the instance's pods on each runtime it is placed on; a runtime with none gets a row with
// no name.
func (q *cli) pods(ctx context.Context, instance string) ([]podRow, error) {
	cl, err := q.client()
	if err != nil {
		return nil, err
	}
	inst, err := cl.WorkloadInstances().GetByName(ctx, instance)
	if err != nil {
		return nil, err
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
	conn := kube.NewConnector(kube.ConnectorConfig{LocalDir: filepath.Join(q.dataDir(), "runtimes")})
	defer conn.Close()
	rows := []podRow{}
	for _, id := range ids {
		if id == "" {
			continue
		}
		rs, err := listPods(ctx, cl, conn, id, ns, inst.ID)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rs...)
	}
	return rows, nil
}

// listPods returns the instance's pods on one runtime.
func listPods(ctx context.Context, cl *client.Client, conn *kube.Connector, runtimeID, ns, instanceID string) ([]podRow, error) {
	rt, err := cl.KubernetesRuntimes().Get(ctx, runtimeID)
	if err != nil {
		return nil, err
	}
	if rt.Spec.Provider == api.ProviderKubeconfig && rt.Spec.Kubeconfig == "" {
		return nil, fmt.Errorf("the kubeconfig of kubernetes_runtime %q is returned to the controller role only: "+
			"run qleet pods with a controller token (qleet token create --role controller)", rt.Name)
	}
	kc, err := conn.Connect(ctx, rt)
	if err != nil {
		return nil, err
	}
	pods, err := kc.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "qleetos.io/instance-id=" + instanceID})
	if err != nil {
		return nil, fmt.Errorf("list pods in %s: %w", rt.Status.Endpoint, err)
	}
	if len(pods.Items) == 0 {
		return []podRow{{Runtime: rt.Name, Namespace: ns}}, nil
	}
	rows := make([]podRow, 0, len(pods.Items))
	for _, p := range pods.Items {
		rows = append(rows, podRowOf(rt.Name, &p))
	}
	return rows, nil
}

func podRowOf(runtime string, p *corev1.Pod) podRow {
	r := podRow{Runtime: runtime, Namespace: p.Namespace, Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName,
		IP: p.Status.PodIP, CreatedAt: p.CreationTimestamp.Time}
	ready := 0
	for _, c := range p.Spec.Containers {
		r.Images = append(r.Images, c.Image)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Ready {
			ready++
		}
		r.Restarts += cs.RestartCount
	}
	r.Ready = fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers))
	return r
}
