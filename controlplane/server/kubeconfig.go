package server

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/qleetos/terraform-provider-qleet/api"
	"k8s.io/client-go/tools/clientcmd"
)

// validateWithKubernetes checks what a kind's own validation cannot without the Kubernetes client: the
// contents of a kubeconfig runtime's kubeconfig. The client package stays free of Kubernetes modules, so
// this check lives here, on the write path of the API server (and of its plan previews).
func validateWithKubernetes(spec any) []api.FieldError {
	rt, ok := spec.(*api.KubernetesRuntimeSpec)
	if !ok || rt.Provider != api.ProviderKubeconfig || rt.Kubeconfig == "" {
		return nil
	}
	if err := checkKubeconfig(rt.Kubeconfig, rt.Context); err != nil {
		return []api.FieldError{{Field: "spec.kubeconfig", Message: err.Error()}}
	}
	return nil
}

// checkKubeconfig parses a kubeconfig and resolves its context, cluster and user. It refuses file
// references and credential plugins: they would read files or run commands on the control plane.
func checkKubeconfig(data, context string) error {
	cfg, err := clientcmd.Load([]byte(data))
	if err != nil {
		return fmt.Errorf("does not parse as a kubeconfig: %w", err)
	}
	name := context
	if name == "" {
		name = cfg.CurrentContext
	}
	if name == "" {
		return errors.New("has no current-context and spec.context is not set")
	}
	kctx, ok := cfg.Contexts[name]
	if !ok {
		return fmt.Errorf("context %q not found", name)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return fmt.Errorf("context %q: cluster %q not found", name, kctx.Cluster)
	}
	u, err := url.Parse(cluster.Server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("cluster %q: server %q is not an http(s) URL", kctx.Cluster, cluster.Server)
	}
	if cluster.CertificateAuthority != "" {
		return fmt.Errorf("cluster %q: certificate-authority file paths are not allowed; embed certificate-authority-data", kctx.Cluster)
	}
	if kctx.AuthInfo == "" {
		return nil
	}
	user, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok {
		return fmt.Errorf("context %q: user %q not found", name, kctx.AuthInfo)
	}
	switch {
	case user.ClientCertificate != "" || user.ClientKey != "" || user.TokenFile != "":
		return fmt.Errorf("user %q: file paths are not allowed; embed the data fields", kctx.AuthInfo)
	case user.Exec != nil || user.AuthProvider != nil:
		return fmt.Errorf("user %q: credential plugins are not allowed (they would run on the control plane)", kctx.AuthInfo)
	}
	return nil
}
