package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResourceOfNamesTheResourceOfAnAPIPath(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/api/v1/nodes":                                        "nodes",
		"/api/v1/namespaces":                                   "namespaces",
		"/api/v1/namespaces/ns":                                "namespaces",
		"/api/v1/namespaces/ns/pods":                           "pods",
		"/api/v1/namespaces/ns/pods/p":                         "pods",
		"/apis/apps/v1/namespaces/ns/deployments/d":            "deployments",
		"/apis/apps/v1/namespaces/ns/deployments/d/status":     "deployments/status",
		"/apis/networking.k8s.io/v1/ingressclasses/nginx":      "ingressclasses",
		"/apis/cert-manager.io/v1/namespaces/n/certificates/c": "certificates",
		"/version": "/version",
	} {
		require.Equal(t, want, resourceOf(path), path)
	}
}
