package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/controlplane/agent"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// agentCmd runs the status agent for one runtime outside the control plane, usually inside the cluster:
// it reports through the API with a controller token.
//
//	qleet agent --runtime NAME [--endpoint URL] [--kubeconfig PATH]   (token: QLEET_TOKEN)
//	qleet agent install --runtime NAME [--endpoint URL]                prints the manifests that run it
func (q *cli) agentCmd() *cobra.Command {
	var runtimeName, kubeconfig string
	cmd := &cobra.Command{
		Use:   "agent --runtime NAME [--endpoint URL] [--kubeconfig PATH]",
		Short: "Run the status agent of one runtime (token: QLEET_TOKEN, a controller token)",
		Long: `agent watches what QleetOS applied in one runtime's cluster and reports live status and events through
the API. It runs in the cluster (see 'qleet agent install') or anywhere with --kubeconfig.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if runtimeName == "" {
				runtimeName = q.getenv("QLEET_RUNTIME")
			}
			if runtimeName == "" {
				return usagef("agent: --runtime is required")
			}
			conn, err := q.resolveConn()
			if err != nil {
				return err
			}
			cl, err := newAPIClient(conn)
			if err != nil {
				return err
			}
			rt, err := cl.KubernetesRuntimes().GetByName(ctx, runtimeName)
			if err != nil {
				return fmt.Errorf("agent: runtime %q: %w", runtimeName, err)
			}
			var rc *rest.Config
			if kubeconfig != "" {
				rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
			} else {
				rc, err = rest.InClusterConfig()
			}
			if err != nil {
				return fmt.Errorf("agent: cluster config: %w", err)
			}
			kc, err := kube.NewCluster(rc)
			if err != nil {
				return err
			}
			log := slog.New(telemetry.LogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
			a, err := agent.New(agent.Config{
				Client: cl, Runtime: rt, Cluster: kc, Logger: log,
				OnChange: func(kind, id string) {
					if err := cl.Raw(kind).RequestReconcile(ctx, id); err != nil {
						log.Warn("agent: request reconcile", "kind", kind, "id", id, "err", err)
					}
				},
			})
			if err != nil {
				return err
			}
			log.Info("agent running", "runtime", rt.Name, "endpoint", conn.Endpoint)
			return a.Run(ctx)
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&runtimeName, "runtime", "", "the kubernetes_runtime this agent watches (env QLEET_RUNTIME)")
	pf.StringVar(&q.conn.endpoint, "endpoint", "", "the QleetOS API endpoint (env QLEET_ENDPOINT; default "+defaultEndpoint+")")
	pf.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: in-cluster config)")

	install := &cobra.Command{
		Use:   "install --runtime NAME [--endpoint URL]",
		Short: "Print the manifests that run the agent in the runtime's cluster",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runtimeName == "" {
				runtimeName = q.getenv("QLEET_RUNTIME")
			}
			if runtimeName == "" {
				return usagef("agent install: --runtime is required")
			}
			endpoint := q.conn.endpoint
			if endpoint == "" {
				endpoint = q.env("endpoint", defaultEndpoint)
			}
			token := q.getenv("QLEET_TOKEN")
			if token == "" {
				token = "<controller token>"
			}
			fmt.Fprint(cmd.OutOrStdout(), agent.InstallManifests(runtimeName, endpoint, token))
			return nil
		},
	}
	cmd.AddCommand(install)
	return cmd
}
