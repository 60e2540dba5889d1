package main

import (
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for one client certificate under pki,
// with the certificates embedded so that the file can be copied elsewhere.
func writeKubeconfig(path, clusterName, endpoint string, pki *clusterPKI, certName string) error {
	caPEM, err := os.ReadFile(pki.cert("ca"))
	if err != nil {
		return err
	}
	certPEM, err := os.ReadFile(pki.cert(certName))
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(pki.key(certName))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: endpoint, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[certName] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: certName}
	cfg.CurrentContext = clusterName
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b, 0o600)
}

// restConfig is the supervisor's own admin connection.
func restConfig(endpoint string, pki *clusterPKI) *rest.Config {
	return &rest.Config{
		Host: endpoint,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   pki.cert("ca"),
			CertFile: pki.cert("admin"),
			KeyFile:  pki.key("admin"),
		},
		QPS:   100,
		Burst: 200,
	}
}
