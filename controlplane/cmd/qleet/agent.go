package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/controlplane/agent"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// runAgent runs the status agent for one runtime outside the control plane, usually inside the cluster:
// it reports through the API with a controller token.
//
//	qleet agent --runtime NAME [--endpoint URL] [--kubeconfig PATH]   (token: QLEET_TOKEN)
//	qleet agent install --runtime NAME [--endpoint URL]                prints the manifests that run it
func runAgent(ctx context.Context, args []string) error {
	install := len(args) > 0 && args[0] == "install"
	if install {
		args = args[1:]
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	runtimeName := fs.String("runtime", envDefault("runtime", ""), "the kubernetes_runtime this agent watches")
	endpoint := fs.String("endpoint", envDefault("endpoint", "http://127.0.0.1:8080"), "QleetOS API endpoint")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (default: in-cluster config)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *runtimeName == "" {
		return usageError{"agent: --runtime is required"}
	}
	if install {
		token := os.Getenv("QLEET_TOKEN")
		if token == "" {
			token = "<controller token>"
		}
		fmt.Print(agent.InstallManifests(*runtimeName, *endpoint, token))
		return nil
	}
	os.Setenv("QLEET_ENDPOINT", *endpoint)
	cl, err := newClient()
	if err != nil {
		return err
	}
	rt, err := cl.KubernetesRuntimes().GetByName(ctx, *runtimeName)
	if err != nil {
		return fmt.Errorf("agent: runtime %q: %w", *runtimeName, err)
	}
	var rc *rest.Config
	if *kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
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
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	a, err := agent.New(agent.Config{
		Client: cl, Runtime: rt, Cluster: kc, Logger: log,
		OnChange: func(instanceID string) {
			if err := cl.WorkloadInstances().RequestReconcile(ctx, instanceID); err != nil {
				log.Warn("agent: request reconcile", "instance", instanceID, "err", err)
			}
		},
	})
	if err != nil {
		return err
	}
	log.Info("agent running", "runtime", rt.Name, "endpoint", *endpoint)
	return a.Run(ctx)
}
