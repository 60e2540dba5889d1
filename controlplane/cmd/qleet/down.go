package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

func (q *cli) downCmd() *cobra.Command {
	f := &upFlags{}
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "down --kubeconfig FILE [--namespace qleet-system]",
		Short: "Remove what qleet up made: the control plane's objects, its runtime registration, tokens and context",
		Long: `down undoes qleet up in that namespace: while the API still answers through the context up wrote, it
deletes the kubernetes_runtime up registered and revokes the tokens up made; then it deletes every object
of the cluster that up labelled as its own (and the namespace, unless something else lives in it), waits
until they are gone, and removes the CLI context. Objects up did not make are never touched. The
PostgreSQL database is yours: down leaves it, with the objects you made through the API.`,
		Example: `  qleet down --kubeconfig ~/.kube/config
  qleet down --kubeconfig kc.yaml --context prod --namespace qleet-system`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return q.down(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	f.add(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for everything to be gone")
	return cmd
}

func (q *cli) down(ctx context.Context, out, errOut io.Writer, f *upFlags) error {
	_, cl, err := f.cluster()
	if err != nil {
		return err
	}
	defer cl.Close()
	owner := upOwner(f.namespace)
	n, err := cl.Clientset.CoreV1().Namespaces().Get(ctx, f.namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		n = nil
	case err != nil:
		return fmt.Errorf("down: namespace %q: %w", f.namespace, err)
	case n.Labels[kube.LabelInstanceID] != owner.InstanceID:
		// Not up's namespace: nothing in it is touched, but cluster-wide objects labelled for this
		// owner (if any) are still up's.
		n = nil
	}
	contextName := ""
	if n != nil {
		contextName = n.Annotations[annUpContext]
		q.downAPI(ctx, out, errOut, contextName, n.Annotations)
	}
	refs, err := kube.Owned(ctx, cl, owner)
	if err != nil {
		return fmt.Errorf("down: %w", err)
	}
	if err := deleteClaims(ctx, cl, refs); err != nil {
		return fmt.Errorf("down: %w", err)
	}
	if err := kube.DeleteAll(ctx, cl, owner); err != nil {
		return fmt.Errorf("down: %w", err)
	}
	fmt.Fprintf(out, "deleted %d objects qleet up made in namespace %s and cluster-wide\n", len(refs), f.namespace)
	if contextName != "" {
		if err := q.dropContext(contextName); err != nil {
			return err
		}
		fmt.Fprintf(out, "removed context %q\n", contextName)
	}
	return nil
}

// downAPI deletes the runtime registration and revokes the tokens that up recorded on its namespace,
// through the context up wrote. An API that does not answer is reported and skipped: the cluster side
// is removed all the same.
func (q *cli) downAPI(ctx context.Context, out, errOut io.Writer, contextName string, ann map[string]string) {
	cfg, _, err := q.loadConfig()
	if err != nil {
		fmt.Fprintf(errOut, "warning: %v; the runtime registration and tokens stay in the database\n", err)
		return
	}
	c := cfg.find(contextName)
	if c == nil {
		fmt.Fprintf(errOut, "warning: no context %q; the runtime registration and tokens qleet up made stay in the database\n", contextName)
		return
	}
	cl, err := newAPIClient(connection{Endpoint: c.Endpoint, Token: c.Token, CACert: c.CACert})
	if err != nil {
		fmt.Fprintf(errOut, "warning: %v\n", err)
		return
	}
	if id := ann[annUpRuntime]; id != "" {
		err := cl.KubernetesRuntimes().Delete(ctx, id, client.DeleteOptions{})
		if err == nil {
			err = cl.KubernetesRuntimes().WaitGone(ctx, id)
		}
		switch {
		case err == nil:
			fmt.Fprintf(out, "deleted kubernetes_runtime %s\n", id)
		case api.IsNotFound(err):
		default:
			fmt.Fprintf(errOut, "warning: kubernetes_runtime %s: %v\n", id, q.explain(err))
		}
	}
	// The context's own admin token is the last id, so it is revoked last.
	for _, id := range strings.Split(ann[annUpTokens], ",") {
		if id == "" {
			continue
		}
		if err := cl.Tokens().Revoke(ctx, id); err != nil && !api.IsNotFound(err) {
			fmt.Fprintf(errOut, "warning: revoke token %s: %v\n", id, q.explain(err))
		}
	}
}

// dropContext removes a context, and the CA file up wrote beside the config, from the config file.
func (q *cli) dropContext(name string) error {
	cfg, path, err := q.loadConfig()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(cfg.Contexts, func(c configContext) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	if ca := cfg.Contexts[i].CACert; ca != "" && strings.HasSuffix(ca, name+"-ca.crt") {
		if err := os.Remove(ca); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	cfg.Contexts = slices.Delete(cfg.Contexts, i, i+1)
	if cfg.CurrentContext == name {
		cfg.CurrentContext = ""
	}
	return saveConfig(path, cfg)
}

// deleteClaims deletes the PersistentVolumeClaims that up's StatefulSets made from their
// volumeClaimTemplates (<template>-<statefulset>-<ordinal>): Kubernetes keeps them when a StatefulSet
// goes, and they would keep up's namespace alive.
func deleteClaims(ctx context.Context, cl *kube.Cluster, refs []kube.AppliedRef) error {
	for _, ref := range refs {
		if ref.Kind != "StatefulSet" {
			continue
		}
		sts, err := cl.Clientset.AppsV1().StatefulSets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		pvcs, err := cl.Clientset.CoreV1().PersistentVolumeClaims(ref.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, tmpl := range sts.Spec.VolumeClaimTemplates {
			prefix := tmpl.Name + "-" + sts.Name + "-"
			for _, pvc := range pvcs.Items {
				ord, ok := strings.CutPrefix(pvc.Name, prefix)
				if !ok || ord == "" || strings.Trim(ord, "0123456789") != "" {
					continue
				}
				err := cl.Clientset.CoreV1().PersistentVolumeClaims(ref.Namespace).Delete(ctx, pvc.Name, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("delete PersistentVolumeClaim %s/%s: %w", ref.Namespace, pvc.Name, err)
				}
			}
		}
	}
	return nil
}
