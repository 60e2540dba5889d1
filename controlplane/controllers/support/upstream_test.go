package support

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// upstreamKubeVersion is the Kubernetes version the pinned charts are rendered for (what kubesim runs).
const upstreamKubeVersion = "v1.31.4"

// TestPinnedUpstreamChartsGiveWhatQleetOSReliesOn renders each pinned upstream chart (api.SupportCharts),
// downloaded from its upstream repository, with QleetOS's values, and checks the objects gateways and
// domain names rely on: the qleet IngressClass and the labelled LoadBalancer Service of ingress-nginx,
// cert-manager's CRDs and QleetOS's ClusterIssuer, external-dns watching the qleet ingress class, and
// metrics-server's API. It needs the chart repositories: where they cannot be reached it skips, saying
// why. docs/guides/air-gapped.md records where it last ran.
func TestPinnedUpstreamChartsGiveWhatQleetOSReliesOn(t *testing.T) {
	t.Parallel()
	r := (&Reconciler{HelmCacheDir: t.TempDir()}).initRenderer()
	checks := map[string]func(t *testing.T, objs []*unstructured.Unstructured){
		api.SupportIngress: func(t *testing.T, objs []*unstructured.Unstructured) {
			ic := find(t, objs, "IngressClass", api.IngressClassName)
			require.Equal(t, "k8s.io/ingress-nginx", str(ic, "spec", "controller"), "the controller kubesim and ingress-nginx serve")
			var lb *unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == "Service" && str(o, "spec", "type") == "LoadBalancer" {
					lb = o
				}
			}
			require.NotNil(t, lb, "a LoadBalancer Service")
			require.Equal(t, "true", lb.GetLabels()["qleetos.io/ingress-controller"], "the label kubesim's load balancer looks for")
			args := containerArgs(find(t, objs, "Deployment", ""))
			require.Contains(t, args, "--controller-class=k8s.io/ingress-nginx")
			require.True(t, slices.ContainsFunc(args, func(a string) bool { return a == "--ingress-class=qleet" }), "serves the qleet class: %v", args)
		},
		api.SupportCertManager: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, crd := range []string{"certificates.cert-manager.io", "clusterissuers.cert-manager.io", "issuers.cert-manager.io"} {
				find(t, objs, "CustomResourceDefinition", crd)
			}
			issuer := find(t, objs, "ClusterIssuer", api.ClusterIssuerName)
			require.NotNil(t, issuer.Object["spec"].(map[string]any)["selfSigned"])
			var args []string
			for _, o := range objs {
				if o.GetKind() == "Deployment" && strings.HasSuffix(o.GetName(), "cert-manager") {
					args = containerArgs(o)
				}
			}
			require.Contains(t, args, "--enable-certificate-owner-ref=true", "certificates' secrets go with them")
		},
		api.SupportExternalDNS: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := containerArgs(find(t, objs, "Deployment", ""))
			require.Contains(t, args, "--source=ingress")
			require.Contains(t, args, "--ingress-class=qleet")
		},
		api.SupportMetricsServer: func(t *testing.T, objs []*unstructured.Unstructured) {
			find(t, objs, "APIService", "v1beta1.metrics.k8s.io")
			find(t, objs, "Deployment", "")
		},
	}
	require.Len(t, checks, len(api.SupportCharts), "every pinned chart is checked")
	for typ, check := range checks {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ss := &api.SupportService{Meta: api.Meta{Name: typ}, Spec: api.SupportServiceSpec{Type: typ}}
			objs, source, err := r.render(ctx, ss, upstreamKubeVersion)
			var fe *render.FetchError
			if errors.As(err, &fe) {
				t.Skipf("the upstream chart repository cannot be reached from here, so the pinned chart was not checked: %v", err)
			}
			require.NoError(t, err)
			up := api.SupportCharts[typ]
			require.Equal(t, up.Chart+" "+up.Version+" from "+up.Repository, source)
			t.Logf("%s: %d objects", source, len(objs))
			check(t, objs)
		})
	}
}

// TestUnfetchableChartSaysWhyAndWhatToDo: a chart repository that cannot be reached (the upstream one
// offline, or a mirror) is a FetchError, which Reconcile turns into a Stalled condition whose message
// names the chart, the repository and the way out.
func TestUnfetchableChartSaysWhyAndWhatToDo(t *testing.T) {
	t.Parallel()
	mirror := "http://" + closedAddr(t)
	for name, tc := range map[string]struct {
		r    *Reconciler
		spec api.SupportServiceSpec
		want []string
	}{
		"a mirror that cannot be reached": {r: &Reconciler{ChartMirror: mirror}, spec: api.SupportServiceSpec{Type: api.SupportIngress},
			want: []string{"ingress-nginx 4.11.3 from " + mirror, "mirror of https://kubernetes.github.io/ingress-nginx", "--support-chart-dir", "--support-chart-mirror"}},
		"the support service's own repository": {r: &Reconciler{ChartMirror: "http://unused.invalid"}, spec: api.SupportServiceSpec{Type: api.SupportCertManager, Repository: mirror},
			want: []string{"cert-manager v1.16.2 from " + mirror, "make that repository reachable"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.r.HelmCacheDir = t.TempDir()
			ss := &api.SupportService{Meta: api.Meta{Name: "s"}, Spec: tc.spec}
			_, _, err := tc.r.initRenderer().render(context.Background(), ss, upstreamKubeVersion)
			var fe *render.FetchError
			require.ErrorAs(t, err, &fe)
			msg := unreachableMessage(ss, err)
			for _, w := range tc.want {
				require.Contains(t, msg, w)
			}
		})
	}
	t.Run("a chart directory that holds the type wins over the mirror", func(t *testing.T) {
		t.Parallel()
		r := (&Reconciler{ChartMirror: mirror, ChartDir: "../../../charts/support", HelmCacheDir: t.TempDir()}).initRenderer()
		_, source, err := r.render(context.Background(), &api.SupportService{Meta: api.Meta{Name: "s"}, Spec: api.SupportServiceSpec{Type: api.SupportIngress}}, upstreamKubeVersion)
		require.NoError(t, err)
		require.Contains(t, source, "local chart")
	})
}

// initRenderer returns r: it renders without a control plane as it is (kept so the tests read the same).
func (r *Reconciler) initRenderer() *Reconciler { return r }

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// find returns the object of that kind (and name, unless empty), failing the test if there is none.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var kinds []string
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	require.Failf(t, "missing object", "no %s %q among %v", kind, name, kinds)
	return nil
}

func str(o *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(o.Object, path...)
	return s
}

// containerArgs returns the args of a workload's first container.
func containerArgs(o *unstructured.Unstructured) []string {
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return nil
	}
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return args
}
