package helm_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

const (
	release   = "qleet"
	namespace = "qleet-system"
)

// values are the least an install needs, with the agent on.
func values() map[string]any {
	return map[string]any{
		"postgresql": map[string]any{"url": "postgres://qleet:pw@db.example.com:5432/qleet?sslmode=verify-full"},
		"secretKey":  map[string]any{"key": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="},
		"controller": map[string]any{"token": "qlt_controller"},
		"agent":      map[string]any{"enabled": true, "runtime": "home"},
	}
}

// set sets a dotted key in vals, making the maps on the way.
func set(vals map[string]any, key string, v any) map[string]any {
	parts := strings.Split(key, ".")
	m := vals
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
	return vals
}

// renderChart renders the chart the way `helm template` does, with the Helm SDK, and parses the manifests.
func renderChart(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	chrt, err := loader.Load("qleet")
	require.NoError(t, err)
	in := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	in.DryRun, in.ClientOnly, in.Replace, in.IncludeCRDs = true, true, true, true
	in.ReleaseName, in.Namespace = release, namespace
	rel, err := in.RunWithContext(context.Background(), chrt, vals)
	if err != nil {
		return nil, err
	}
	return render.ParseManifests(rel.Manifest)
}

// rendered is a rendering indexed by kind and name.
type rendered map[string]*unstructured.Unstructured

func mustRender(t *testing.T, vals map[string]any) rendered {
	t.Helper()
	objs, err := renderChart(t, vals)
	require.NoError(t, err)
	out := rendered{}
	for _, o := range objs {
		key := o.GetKind() + "/" + o.GetName()
		require.NotContains(t, out, key, "rendered twice")
		out[key] = o
	}
	return out
}

// get converts the object kind/name into the typed into.
func (r rendered) get(t *testing.T, kind, name string, into any) {
	t.Helper()
	o, ok := r[kind+"/"+name]
	require.True(t, ok, "%s/%s not rendered; have %v", kind, name, r.keys())
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true), "%s/%s", kind, name)
}

func (r rendered) keys() []string {
	var keys []string
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (r rendered) ofKind(kind string) []string {
	var names []string
	for _, k := range r.keys() {
		if name, ok := strings.CutPrefix(k, kind+"/"); ok {
			names = append(names, name)
		}
	}
	return names
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestChartRenders(t *testing.T) {
	t.Parallel()
	r := mustRender(t, values())
	var api, ctrl, agent appsv1.Deployment
	r.get(t, "Deployment", "qleet-api", &api)
	r.get(t, "Deployment", "qleet-controller", &ctrl)
	r.get(t, "Deployment", "qleet-agent", &agent)
	var nats appsv1.StatefulSet
	r.get(t, "StatefulSet", "qleet-nats", &nats)

	t.Run("it installs the API, the controllers, NATS and the agent, and nothing cluster-wide but the agent's read-only role", func(t *testing.T) {
		require.Equal(t, []string{"qleet-agent", "qleet-api", "qleet-controller"}, r.ofKind("Deployment"))
		require.Equal(t, []string{"qleet-nats"}, r.ofKind("StatefulSet"))
		require.Equal(t, []string{"qleet-agent"}, r.ofKind("ClusterRole"))
		require.Equal(t, []string{"qleet-agent"}, r.ofKind("ClusterRoleBinding"))
		require.Empty(t, r.ofKind("Role"))
		require.Empty(t, r.ofKind("Certificate"), "no cert-manager Certificate unless asked")
	})

	t.Run("the API and the controllers run the qleet binary's api and controller modes, wired to NATS, PostgreSQL and each other", func(t *testing.T) {
		require.Equal(t, []string{"api"}, api.Spec.Template.Spec.Containers[0].Args)
		require.Equal(t, []string{"controller", "--workers=16", "--health-listen=:8081"}, ctrl.Spec.Template.Spec.Containers[0].Args)
		require.Equal(t, "ghcr.io/qleetos/qleet:0.1.0", api.Spec.Template.Spec.Containers[0].Image)
		natsURL := "nats://qleet-nats-0.qleet-nats-headless.qleet-system.svc:4222,nats://qleet-nats-1.qleet-nats-headless.qleet-system.svc:4222,nats://qleet-nats-2.qleet-nats-headless.qleet-system.svc:4222"
		ae, ce := envOf(api.Spec.Template.Spec.Containers[0]), envOf(ctrl.Spec.Template.Spec.Containers[0])
		require.Equal(t, natsURL, ae["QLEET_NATS_URL"].Value)
		require.Equal(t, natsURL, ce["QLEET_NATS_URL"].Value)
		require.Equal(t, "3", ae["QLEET_NATS_REPLICAS"].Value, "the stream and lock bucket are replicated on every node")
		require.Equal(t, "3", ce["QLEET_NATS_REPLICAS"].Value)
		require.Equal(t, "0.0.0.0:8443", ae["QLEET_LISTEN"].Value)
		require.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "qleet-database"}, Key: "url"},
			ae["QLEET_DATABASE_URL"].ValueFrom.SecretKeyRef)
		require.Equal(t, "/etc/qleet/secret-key/key", ae["QLEET_SECRET_KEY_FILE"].Value)
		require.Equal(t, "https://qleet-api.qleet-system.svc:8443", ce["QLEET_API_ENDPOINT"].Value)
		require.Equal(t, "qleet-controller-token", ce["QLEET_TOKEN"].ValueFrom.SecretKeyRef.Name)
		require.NotContains(t, ce, "QLEET_DATABASE_URL", "controllers reach the store only through the API")
		var db corev1.Secret
		r.get(t, "Secret", "qleet-database", &db)
		require.Equal(t, "postgres://qleet:pw@db.example.com:5432/qleet?sslmode=verify-full", db.StringData["url"])
		require.Equal(t, []string{"agent", "--runtime", "home", "--endpoint", "https://qleet-api.qleet-system.svc:8443"}, agent.Spec.Template.Spec.Containers[0].Args)
	})

	t.Run("the API has liveness and readiness probes on /healthz and /readyz", func(t *testing.T) {
		c := api.Spec.Template.Spec.Containers[0]
		require.NotNil(t, c.LivenessProbe)
		require.NotNil(t, c.ReadinessProbe)
		require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
		require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
		require.Equal(t, corev1.URISchemeHTTPS, c.ReadinessProbe.HTTPGet.Scheme)
		require.Equal(t, "https", c.ReadinessProbe.HTTPGet.Port.String())
	})

	t.Run("the controllers have liveness and readiness probes on their health port", func(t *testing.T) {
		c := ctrl.Spec.Template.Spec.Containers[0]
		require.NotNil(t, c.LivenessProbe)
		require.NotNil(t, c.ReadinessProbe)
		require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
		require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
		require.Equal(t, "health", c.ReadinessProbe.HTTPGet.Port.String())
		require.Equal(t, int32(8081), c.Ports[0].ContainerPort)
	})

	t.Run("NATS is a StatefulSet of 3 with JetStream on a volume, each node routed to every other", func(t *testing.T) {
		require.Equal(t, int32(3), *nats.Spec.Replicas)
		require.Equal(t, appsv1.ParallelPodManagement, nats.Spec.PodManagementPolicy)
		require.Len(t, nats.Spec.VolumeClaimTemplates, 1)
		c := nats.Spec.Template.Spec.Containers[0]
		require.NotNil(t, c.LivenessProbe)
		require.NotNil(t, c.ReadinessProbe)
		require.Contains(t, c.LivenessProbe.HTTPGet.Path, "/healthz")
		var cm corev1.ConfigMap
		r.get(t, "ConfigMap", "qleet-nats", &cm)
		conf := cm.Data["nats.conf"]
		require.Contains(t, conf, "jetstream {")
		for i := range 3 {
			require.Contains(t, conf, fmt.Sprintf("nats://qleet-nats-%d.qleet-nats-headless.qleet-system.svc:6222", i))
		}
		var headless corev1.Service
		r.get(t, "Service", "qleet-nats-headless", &headless)
		require.Equal(t, "None", headless.Spec.ClusterIP)
	})

	t.Run("NATS runs the nats-server version the tests run embedded", func(t *testing.T) {
		gomod, err := os.ReadFile("../../go.mod")
		require.NoError(t, err)
		m := regexp.MustCompile(`github.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(gomod)
		require.NotNil(t, m, "go.mod requires no nats-server")
		require.Equal(t, "nats:"+string(m[1])+"-alpine", nats.Spec.Template.Spec.Containers[0].Image)
	})

	t.Run("every container has resources and runs unprivileged with a read-only root", func(t *testing.T) {
		for _, spec := range []corev1.PodSpec{api.Spec.Template.Spec, ctrl.Spec.Template.Spec, agent.Spec.Template.Spec, nats.Spec.Template.Spec} {
			require.True(t, *spec.SecurityContext.RunAsNonRoot)
			for _, c := range spec.Containers {
				require.False(t, c.Resources.Requests.Cpu().IsZero(), c.Name)
				require.False(t, c.Resources.Requests.Memory().IsZero(), c.Name)
				require.False(t, c.Resources.Limits.Memory().IsZero(), c.Name)
				require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
				require.False(t, *c.SecurityContext.AllowPrivilegeEscalation, c.Name)
				require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, c.Name)
			}
		}
	})

	t.Run("the API's non-root user can read its TLS key and at-rest key (group-readable, with the pod's fsGroup)", func(t *testing.T) {
		spec := api.Spec.Template.Spec
		require.NotNil(t, spec.SecurityContext.FSGroup)
		secrets := 0
		for _, v := range spec.Volumes {
			if v.Secret != nil {
				secrets++
				require.NotNil(t, v.Secret.DefaultMode, v.Name)
				require.NotZero(t, *v.Secret.DefaultMode&0o040, "volume %s mode %o", v.Name, *v.Secret.DefaultMode)
				require.Zero(t, *v.Secret.DefaultMode&0o007, "volume %s mode %o: not world-readable", v.Name, *v.Secret.DefaultMode)
			}
		}
		require.Equal(t, 2, secrets)
	})

	t.Run("a PodDisruptionBudget covers the API, the controllers and NATS, one pod at a time", func(t *testing.T) {
		for name, dep := range map[string]map[string]string{"qleet-api": api.Spec.Selector.MatchLabels, "qleet-controller": ctrl.Spec.Selector.MatchLabels, "qleet-nats": nats.Spec.Selector.MatchLabels} {
			var pdb policyv1.PodDisruptionBudget
			r.get(t, "PodDisruptionBudget", name, &pdb)
			require.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue(), name)
			require.Equal(t, dep, pdb.Spec.Selector.MatchLabels, name)
		}
	})

	t.Run("every component has a NetworkPolicy on ingress and egress; controllers and the agent take no ingress", func(t *testing.T) {
		for _, name := range []string{"qleet-api", "qleet-controller", "qleet-nats", "qleet-agent"} {
			var np networkingv1.NetworkPolicy
			r.get(t, "NetworkPolicy", name, &np)
			require.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes, name)
			require.NotEmpty(t, np.Spec.Egress, name)
			if name == "qleet-controller" || name == "qleet-agent" {
				require.Empty(t, np.Spec.Ingress, name)
			}
		}
		var np networkingv1.NetworkPolicy
		r.get(t, "NetworkPolicy", "qleet-nats", &np)
		require.Len(t, np.Spec.Ingress, 2, "clients on 4222 and routes on 6222; no monitoring unless asked")
		require.Equal(t, int32(4222), np.Spec.Ingress[0].Ports[0].Port.IntVal)
		require.Len(t, np.Spec.Ingress[0].From, 2, "only the API and the controllers are NATS clients")
	})

	t.Run("only the agent talks to the Kubernetes API, and it only reads, never Secrets", func(t *testing.T) {
		for _, name := range []string{"qleet-api", "qleet-controller", "qleet-nats"} {
			var sa corev1.ServiceAccount
			r.get(t, "ServiceAccount", name, &sa)
			require.False(t, *sa.AutomountServiceAccountToken, name)
		}
		require.False(t, *api.Spec.Template.Spec.AutomountServiceAccountToken)
		require.Equal(t, "qleet-agent", agent.Spec.Template.Spec.ServiceAccountName)
		var role rbacv1.ClusterRole
		r.get(t, "ClusterRole", "qleet-agent", &role)
		for _, rule := range role.Rules {
			require.NotContains(t, rule.APIGroups, "*")
			require.NotContains(t, rule.Resources, "*")
			require.NotContains(t, rule.Resources, "secrets")
			for _, verb := range rule.Verbs {
				require.Contains(t, []string{"get", "list", "watch"}, verb, "rule %+v", rule)
			}
		}
		var binding rbacv1.ClusterRoleBinding
		r.get(t, "ClusterRoleBinding", "qleet-agent", &binding)
		require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "qleet-agent", Namespace: namespace}}, binding.Subjects)
	})
}

func TestChartValuesFlowThrough(t *testing.T) {
	t.Parallel()
	vals := values()
	set(vals, "image.tag", "v1.2.3")
	set(vals, "api.replicas", 4)
	set(vals, "controller.replicas", 3)
	set(vals, "controller.workers", 32)
	set(vals, "nats.replicas", 5)
	set(vals, "nats.jetstream.storageSize", "50Gi")
	set(vals, "api.resources", map[string]any{"requests": map[string]any{"cpu": "2", "memory": "2Gi"}, "limits": map[string]any{"memory": "4Gi"}})
	set(vals, "postgresql", map[string]any{"existingSecret": "pg", "existingSecretKey": "dsn"})
	set(vals, "controller.token", "")
	set(vals, "controller.existingSecret", "ctrl")
	set(vals, "tls.secretName", "my-tls")
	set(vals, "agent.enabled", false)
	set(vals, "networkPolicy.metricsFrom", []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"name": "monitoring"}}}})
	r := mustRender(t, vals)

	var api, ctrl appsv1.Deployment
	r.get(t, "Deployment", "qleet-api", &api)
	r.get(t, "Deployment", "qleet-controller", &ctrl)
	var nats appsv1.StatefulSet
	r.get(t, "StatefulSet", "qleet-nats", &nats)
	require.Equal(t, int32(4), *api.Spec.Replicas)
	require.Equal(t, int32(3), *ctrl.Spec.Replicas)
	require.Equal(t, int32(5), *nats.Spec.Replicas)
	require.Equal(t, "ghcr.io/qleetos/qleet:v1.2.3", api.Spec.Template.Spec.Containers[0].Image)
	require.Equal(t, "2Gi", api.Spec.Template.Spec.Containers[0].Resources.Requests.Memory().String())
	require.Equal(t, "50Gi", nats.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String())
	require.Equal(t, []string{"controller", "--workers=32", "--health-listen=:8081"}, ctrl.Spec.Template.Spec.Containers[0].Args)
	require.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "pg"}, Key: "dsn"},
		envOf(api.Spec.Template.Spec.Containers[0])["QLEET_DATABASE_URL"].ValueFrom.SecretKeyRef)
	require.Equal(t, "ctrl", envOf(ctrl.Spec.Template.Spec.Containers[0])["QLEET_TOKEN"].ValueFrom.SecretKeyRef.Name)
	require.NotContains(t, r.keys(), "Secret/qleet-database", "an existing Secret is used, not made")
	require.NotContains(t, r.keys(), "Secret/qleet-controller-token")
	for _, v := range api.Spec.Template.Spec.Volumes {
		if v.Name == "tls" {
			require.Equal(t, "my-tls", v.Secret.SecretName)
		}
	}
	require.Empty(t, r.ofKind("ClusterRole"), "no agent, no RBAC at all")
	require.NotContains(t, r.keys(), "NetworkPolicy/qleet-agent")
	var cm corev1.ConfigMap
	r.get(t, "ConfigMap", "qleet-nats", &cm)
	require.Contains(t, cm.Data["nats.conf"], "qleet-nats-4.qleet-nats-headless")
	var np networkingv1.NetworkPolicy
	r.get(t, "NetworkPolicy", "qleet-nats", &np)
	require.Len(t, np.Spec.Ingress, 3, "monitoring opened to metricsFrom")
	r.get(t, "NetworkPolicy", "qleet-controller", &np)
	require.Len(t, np.Spec.Ingress, 1, "the controllers' /metrics opened to metricsFrom")
	require.Equal(t, int32(8081), np.Spec.Ingress[0].Ports[0].Port.IntVal)

	t.Run("cert-manager makes the API's certificate for its Service names into the TLS Secret", func(t *testing.T) {
		vals := set(values(), "tls.certManager", map[string]any{"enabled": true, "issuerRef": map[string]any{"kind": "ClusterIssuer", "name": "internal-ca"}, "dnsNames": []any{"qleet.example.com"}})
		r := mustRender(t, vals)
		crt := r["Certificate/qleet-api"]
		require.NotNil(t, crt, "have %v", r.keys())
		secretName, _, _ := unstructured.NestedString(crt.Object, "spec", "secretName")
		require.Equal(t, "qleet-api-tls", secretName)
		names, _, _ := unstructured.NestedStringSlice(crt.Object, "spec", "dnsNames")
		require.Contains(t, names, "qleet-api.qleet-system.svc")
		require.Contains(t, names, "qleet.example.com")
		issuer, _, _ := unstructured.NestedString(crt.Object, "spec", "issuerRef", "name")
		require.Equal(t, "internal-ca", issuer)
	})

	t.Run("NetworkPolicies can be left to the cluster's own", func(t *testing.T) {
		r := mustRender(t, set(values(), "networkPolicy.enabled", false))
		require.Empty(t, r.ofKind("NetworkPolicy"))
		require.Len(t, r.ofKind("Deployment"), 3)
	})

	t.Run("a single replica gets no PodDisruptionBudget, which would block every drain", func(t *testing.T) {
		vals := set(values(), "api.replicas", 1)
		set(vals, "nats.replicas", 1)
		r := mustRender(t, vals)
		require.Equal(t, []string{"qleet-controller"}, r.ofKind("PodDisruptionBudget"))
		var cm corev1.ConfigMap
		r.get(t, "ConfigMap", "qleet-nats", &cm)
		require.NotContains(t, cm.Data["nats.conf"], "cluster {", "one node has no routes")
	})
}

func TestChartRefusesBadValues(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		key  string
		val  any
		want string
	}{
		"an even NATS cluster, which cannot keep a quorum": {"nats.replicas", 2, "nats.replicas"},
		"no PostgreSQL":                       {"postgresql.url", "", "postgresql: url or existingSecret is required"},
		"PostgreSQL given twice":              {"postgresql.existingSecret", "pg", "postgresql: give url or existingSecret, not both"},
		"a database URL that is not postgres": {"postgresql.url", "mysql://x", "postgresql.url"},
		"no secret key":                       {"secretKey.key", "", "secretKey: key or existingSecret is required"},
		"a secret key that is not 32 bytes":   {"secretKey.key", "c2hvcnQ=", "secretKey.key"},
		"no controller token":                 {"controller.token", "", "controller: token or existingSecret is required"},
		"an agent with no runtime":            {"agent.runtime", "", "agent.runtime: required"},
		"no API replicas":                     {"api.replicas", 0, "api.replicas"},
		"an unknown log level":                {"logLevel", "verbose", "logLevel"},
		"a misspelt key":                      {"api.replica", 2, "replica"},
		"cert-manager with no issuer":         {"tls.certManager.enabled", true, "tls.certManager.issuerRef.name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderChart(t, set(values(), tc.key, tc.val))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// selfSigned returns a kubernetes.io/tls Secret for the API's Service name, its own CA.
func selfSigned(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "qleet-api"},
		DNSNames:  []string{"qleet-api." + namespace + ".svc"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	crt := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata":   map[string]any{"name": "qleet-api-tls", "namespace": namespace},
		"stringData": map[string]any{"tls.crt": crt, "ca.crt": crt, "tls.key": string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))},
	}}
}

// TestChartBecomesAvailableOnKubesim applies the rendered chart to a real Kubernetes control plane
// (kubesim: kwok plays the pods) and waits until the Deployments are Available, NATS has 3 ready
// nodes, and the PodDisruptionBudgets count their pods healthy.
func TestChartBecomesAvailableOnKubesim(t *testing.T) {
	t.Parallel()
	objs, err := renderChart(t, values())
	require.NoError(t, err)
	sim := kubesimtest.Start(t, kubesimtest.WithNodes(3))
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(t, err)
	rc, err := kube.RESTConfigFromKubeconfig(raw, "")
	require.NoError(t, err)
	cl, err := kube.NewCluster(rc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}
	for _, o := range append([]*unstructured.Unstructured{ns, selfSigned(t)}, objs...) {
		gvk := o.GroupVersionKind()
		m, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s", gvk)
		data, err := json.Marshal(o.Object)
		require.NoError(t, err)
		res := cl.Dynamic.Resource(m.Resource)
		force := true
		opts := metav1.PatchOptions{FieldManager: "chart-test", Force: &force}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err = res.Namespace(namespace).Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
		} else {
			_, err = res.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
		}
		require.NoError(t, err, "apply %s/%s", o.GetKind(), o.GetName())
	}

	cs := cl.Clientset
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, name := range []string{"qleet-api", "qleet-controller", "qleet-agent"} {
			d, err := cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
			if assert.NoError(c, err) {
				assert.True(c, available(d), "deployment %s is not Available", name)
				assert.Equal(c, *d.Spec.Replicas, d.Status.AvailableReplicas, "deployment %s available replicas", name)
			}
		}
		s, err := cs.AppsV1().StatefulSets(namespace).Get(ctx, "qleet-nats", metav1.GetOptions{})
		if assert.NoError(c, err) {
			assert.Equal(c, int32(3), s.Status.ReadyReplicas, "statefulset qleet-nats ready replicas")
		}
		for name, want := range map[string]int32{"qleet-api": 2, "qleet-controller": 2, "qleet-nats": 3} {
			p, err := cs.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
			if assert.NoError(c, err) {
				assert.Equal(c, want, p.Status.CurrentHealthy, "pdb %s healthy pods", name)
				assert.Equal(c, int32(1), p.Status.DisruptionsAllowed, "pdb %s disruptions allowed", name)
			}
		}
	}, 2*time.Minute, 500*time.Millisecond)
}

func available(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
