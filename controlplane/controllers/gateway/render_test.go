package gateway

import (
	"testing"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRender(t *testing.T) {
	t.Parallel()
	off := false
	for _, tc := range []struct {
		name      string
		spec      api.GatewaySpec
		kinds     []string
		redirect  string
		url       string
		hostRules int
		tlsSecret string
	}{
		{"a host: TLS and a redirect by default", api.GatewaySpec{Hosts: []string{"a.example.com", "b.example.com"}, Paths: []string{"/", "/api"}},
			[]string{"Certificate", "Ingress"}, "true", "https://a.example.com/", 2, "web-tls"},
		{"a host without the redirect", api.GatewaySpec{Hosts: []string{"a.example.com"}, Paths: []string{"/"}, RedirectHTTP: &off},
			[]string{"Certificate", "Ingress"}, "false", "https://a.example.com/", 1, "web-tls"},
		{"TLS off", api.GatewaySpec{Hosts: []string{"a.example.com"}, Paths: []string{"/x"}, TLS: &off},
			[]string{"Ingress"}, "false", "http://a.example.com/x", 1, ""},
		{"no host: any host, plain HTTP", api.GatewaySpec{Paths: []string{"/"}},
			[]string{"Ingress"}, "false", "http://10.0.0.1/", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := &api.Gateway{Meta: api.Meta{Name: "web"}, Spec: tc.spec}
			objs := render(gw, "app", "app-ns", 8080)
			var kinds []string
			var ing *unstructured.Unstructured
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
				require.Equal(t, "app-ns", o.GetNamespace())
				if o.GetKind() == "Ingress" {
					ing = o
				}
			}
			require.Equal(t, tc.kinds, kinds, "the Certificate is applied before the Ingress that names its Secret")
			require.Equal(t, tc.redirect, ing.GetAnnotations()["nginx.ingress.kubernetes.io/ssl-redirect"])
			class, _, _ := unstructured.NestedString(ing.Object, "spec", "ingressClassName")
			require.Equal(t, api.IngressClassName, class)
			rules, _, _ := unstructured.NestedSlice(ing.Object, "spec", "rules")
			require.Len(t, rules, tc.hostRules)
			paths, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "http", "paths")
			require.Len(t, paths, len(tc.spec.Paths))
			port, _, _ := unstructured.NestedInt64(paths[0].(map[string]any), "backend", "service", "port", "number")
			require.Equal(t, int64(8080), port)
			tls, _, _ := unstructured.NestedSlice(ing.Object, "spec", "tls")
			if tc.tlsSecret == "" {
				require.Empty(t, tls)
			} else {
				require.Equal(t, tc.tlsSecret, tls[0].(map[string]any)["secretName"])
			}
			require.Equal(t, tc.url, runtimeURL(gw, "10.0.0.1"))
		})
	}
}

func TestCertificateState(t *testing.T) {
	t.Parallel()
	cert := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"notAfter":   "2027-02-21T08:00:00Z",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
	}}}
	ready, expiry := certificateState(cert)
	require.True(t, ready)
	require.Equal(t, time.Date(2027, 2, 21, 8, 0, 0, 0, time.UTC), *expiry)
	ready, expiry = certificateState(&unstructured.Unstructured{Object: map[string]any{}})
	require.False(t, ready, "no status yet")
	require.Nil(t, expiry)
}
