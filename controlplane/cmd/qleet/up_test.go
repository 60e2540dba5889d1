package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// clusterObjects lists every object of the kinds QleetOS applies and searches (kube.SearchKinds), in
// every namespace, as "Kind namespace/name".
func clusterObjects(ctx context.Context, t *testing.T, cl *kube.Cluster) []string {
	t.Helper()
	var out []string
	for _, gvk := range kube.SearchKinds {
		m, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue
		}
		require.NoError(t, err)
		list, err := cl.Dynamic.Resource(m.Resource).List(ctx, metav1.ListOptions{})
		require.NoError(t, err, "%s", gvk.Kind)
		for _, o := range list.Items {
			out = append(out, gvk.Kind+" "+o.GetNamespace()+"/"+o.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// diffObjects says what after adds to before and what it lacks.
func diffObjects(before, after []string) (added, removed []string) {
	for _, o := range after {
		if !slices.Contains(before, o) {
			added = append(added, o)
		}
	}
	for _, o := range before {
		if !slices.Contains(after, o) {
			removed = append(removed, o)
		}
	}
	return added, removed
}

// TestUpInstallsRegistersAndLogsInAndDownUndoesOnlyThat runs `qleet up` against a kubesim cluster, with
// a control plane of the test standing in for the API the chart would run (kubesim runs no containers),
// then `qleet down`, and compares the cluster with what it was before.
func TestUpInstallsRegistersAndLogsInAndDownUndoesOnlyThat(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t)
	a, admin := cptest.Start(t, cptest.Config())
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(t, err)
	rc, err := kube.RESTConfigFromKubeconfig(raw, "")
	require.NoError(t, err)
	kcl, err := kube.NewCluster(rc)
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	cs := kcl.Clientset
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Someone else's things, made before up: a namespace holding a Secret named like the chart's, and a
	// ClusterRole.
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets("team-a").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "qleet-api-tls"}, StringData: map[string]string{"x": "mine"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "team-a-reader"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The controller manager adds its own objects to a new namespace; wait for them before the snapshot.
	await.NoError(t, time.Minute, func(ctx context.Context) error {
		if _, err := cs.CoreV1().ServiceAccounts("team-a").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().ConfigMaps("team-a").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	before := clusterObjects(ctx, t, kcl)

	dir := t.TempDir()
	// The kubeconfig up is given also holds another cluster's context, which must not reach the API.
	kc, err := clientcmd.Load(raw)
	require.NoError(t, err)
	kc.Clusters["elsewhere"] = &clientcmdapi.Cluster{Server: "https://elsewhere.example.com"}
	kc.AuthInfos["elsewhere"] = &clientcmdapi.AuthInfo{Token: "elsewhere-secret"}
	kc.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "elsewhere", AuthInfo: "elsewhere"}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, kubeconfig))
	valuesFile := filepath.Join(dir, "values.yaml")
	require.NoError(t, os.WriteFile(valuesFile, []byte("postgresql:\n  url: postgres://qleet:pw@db.example.com:5432/qleet?sslmode=verify-full\n"), 0o600))
	env := cliEnv(t, "QLEET_BOOTSTRAP_TOKEN", a.AdminToken)
	upArgs := func(ns string) []string {
		return []string{"up", "--kubeconfig", kubeconfig, "--namespace", ns, "--values", valuesFile, "--endpoint", a.Endpoint,
			"--image", "registry.example.com/qleet:9.9.9", "--runtime", "home", "--timeout", "1m"}
	}

	t.Run("up refuses a namespace that exists, and changes nothing", func(t *testing.T) {
		r := qleetIn(ctx, env, upArgs("team-a")...)
		require.Equal(t, 1, r.code, r.stdout)
		require.Contains(t, r.stderr, `namespace "team-a" exists`)
		added, removed := diffObjects(before, clusterObjects(ctx, t, kcl))
		require.Empty(t, added, "up added")
		require.Empty(t, removed, "up removed")
		_, err := admin.KubernetesRuntimes().GetByName(ctx, "home")
		require.True(t, api.IsNotFound(err), "no registration: %v", err)
	})

	t.Run("up refuses a cluster-wide object of the chart that someone else made, and changes nothing", func(t *testing.T) {
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "qleet-agent"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		r := qleetIn(ctx, env, upArgs("qleet-system")...)
		require.Equal(t, 1, r.code, r.stdout)
		require.Contains(t, r.stderr, `ClusterRole "qleet-agent" exists`)
		_, err = cs.CoreV1().Namespaces().Get(ctx, "qleet-system", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "namespace made anyway: %v", err)
		require.NoError(t, cs.RbacV1().ClusterRoles().Delete(ctx, "qleet-agent", metav1.DeleteOptions{}))
		await.NoError(t, 30*time.Second, func(ctx context.Context) error {
			added, removed := diffObjects(before, clusterObjects(ctx, t, kcl))
			if len(added)+len(removed) > 0 {
				return fmt.Errorf("added %v, removed %v", added, removed)
			}
			return nil
		})
	})

	t.Run("down in a namespace up did not make deletes nothing", func(t *testing.T) {
		r := qleetIn(ctx, env, "down", "--kubeconfig", sim.Kubeconfig, "--namespace", "team-a")
		require.Equal(t, 0, r.code, r.stderr)
		added, removed := diffObjects(before, clusterObjects(ctx, t, kcl))
		require.Empty(t, added)
		require.Empty(t, removed)
	})

	r := qleetIn(ctx, env, upArgs("qleet-system")...)
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	ns := "qleet-system"
	owner := upOwner(ns)

	t.Run("up applied the chart with the image asked for, every object labelled as up's", func(t *testing.T) {
		for _, name := range []string{"qleet-api", "qleet-controller", "qleet-agent"} {
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, "registry.example.com/qleet:9.9.9", d.Spec.Template.Spec.Containers[0].Image, name)
		}
		agent, err := cs.AppsV1().Deployments(ns).Get(ctx, "qleet-agent", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, []string{"agent", "--runtime", "home", "--endpoint", "https://qleet-api.qleet-system.svc:8443"}, agent.Spec.Template.Spec.Containers[0].Args)
		_, err = cs.AppsV1().StatefulSets(ns).Get(ctx, "qleet-nats", metav1.GetOptions{})
		require.NoError(t, err)
		ctrl, err := cs.AppsV1().Deployments(ns).Get(ctx, "qleet-controller", metav1.GetOptions{})
		require.NoError(t, err)
		for _, e := range ctrl.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "QLEET_TOKEN" {
				require.Equal(t, "qleet-controller-token", e.ValueFrom.SecretKeyRef.Name)
			}
		}

		added, removed := diffObjects(before, clusterObjects(ctx, t, kcl))
		require.Empty(t, removed)
		refs, err := kube.Owned(ctx, kcl, owner)
		require.NoError(t, err)
		owned := map[string]bool{}
		for _, ref := range refs {
			owned[ref.Kind+" "+ref.Namespace+"/"+ref.Name] = true
		}
		for _, want := range []string{"Namespace /qleet-system", "ClusterRole /qleet-agent", "ClusterRoleBinding /qleet-agent",
			"Secret qleet-system/qleet-api-tls", "Secret qleet-system/qleet-controller-token", "Secret qleet-system/qleet-database",
			"Secret qleet-system/qleet-secret-key", "Service qleet-system/qleet-api", "NetworkPolicy qleet-system/qleet-api",
			"PodDisruptionBudget qleet-system/qleet-nats", "ServiceAccount qleet-system/qleet-api"} {
			require.True(t, owned[want], "%s is not labelled as up's; owned: %v", want, refs)
		}
		// Everything new is up's, but what Kubernetes makes by itself: the namespace's default
		// ServiceAccount and root CA ConfigMap, and the volumes of up's NATS StatefulSet (ReplicaSets and
		// pods are not listed).
		for _, o := range added {
			if o == "ServiceAccount qleet-system/default" || o == "ConfigMap qleet-system/kube-root-ca.crt" ||
				strings.HasPrefix(o, "PersistentVolumeClaim qleet-system/data-qleet-nats-") {
				continue
			}
			require.True(t, owned[o], "%s appeared but is not labelled as up's", o)
		}
		cr, err := cs.RbacV1().ClusterRoles().Get(ctx, "qleet-agent", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "qleet", cr.Labels["app.kubernetes.io/managed-by"])
		require.Equal(t, "qleet-up-qleet-system", cr.Labels[kube.LabelInstanceID])
		require.Equal(t, "bootstrap", cr.Labels[kube.LabelOwnerKind])
	})

	var cfg configFile
	var tokenIDs []string
	t.Run("up wrote the context: the endpoint, the API's CA and a new admin token the API accepts", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(env["HOME"], ".config", "qleet", "config.yaml"))
		require.NoError(t, err)
		require.NoError(t, yaml.UnmarshalStrict(data, &cfg))
		require.Equal(t, "qleet-qleet-system", cfg.CurrentContext)
		c := cfg.find("qleet-qleet-system")
		require.NotNil(t, c)
		require.Equal(t, a.Endpoint, c.Endpoint)
		require.NotEqual(t, a.AdminToken, c.Token, "the context gets a token of its own, not the bootstrap one")

		tlsSecret, err := cs.CoreV1().Secrets(ns).Get(ctx, "qleet-api-tls", metav1.GetOptions{})
		require.NoError(t, err)
		ca, err := os.ReadFile(c.CACert)
		require.NoError(t, err)
		require.Equal(t, string(tlsSecret.Data["ca.crt"]), string(ca), "the context trusts the CA of the installed API")
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(ca))
		block, _ := pem.Decode(tlsSecret.Data["tls.crt"])
		require.NotNil(t, block)
		serving, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		for _, name := range []string{"qleet-api.qleet-system.svc", "localhost", "127.0.0.1"} {
			_, err = serving.Verify(x509.VerifyOptions{DNSName: name, Roots: pool})
			require.NoError(t, err, "the API's certificate is valid for %s", name)
		}

		toks, err := admin.Tokens().List(ctx)
		require.NoError(t, err)
		roles := map[string]string{}
		for _, tk := range toks {
			roles[tk.Name] = tk.Role
		}
		require.Equal(t, api.RoleAdmin, roles["qleet-qleet-system"])
		require.Equal(t, api.RoleController, roles["controller"])
		// The CLI reaches the API through the context alone.
		r := qleetIn(ctx, cliEnv(t, "HOME", env["HOME"]), "token", "list")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "qleet-qleet-system")
	})

	t.Run("the controllers' Secret holds a controller token the API accepts", func(t *testing.T) {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, "qleet-controller-token", metav1.GetOptions{})
		require.NoError(t, err)
		tok := string(s.Data["token"])
		require.True(t, strings.HasPrefix(tok, "qlt_"), "token %q", tok)
		ctl, err := client.New(a.Endpoint, client.WithToken(tok))
		require.NoError(t, err)
		// A controller token reads the runtime's write-only kubeconfig: only the context up installed into.
		rt, err := ctl.KubernetesRuntimes().GetByName(ctx, "home")
		require.NoError(t, err)
		reg, err := clientcmd.Load([]byte(rt.Spec.Kubeconfig))
		require.NoError(t, err)
		require.Len(t, reg.Contexts, 1)
		require.NotContains(t, rt.Spec.Kubeconfig, "elsewhere")
		_, err = ctl.Tokens().List(ctx)
		require.True(t, api.IsForbidden(err), "a controller token is not an admin: %v", err)
	})

	t.Run("up registered the cluster as kubernetes_runtime home, with its kubeconfig", func(t *testing.T) {
		rt, err := admin.KubernetesRuntimes().GetByName(ctx, "home")
		require.NoError(t, err)
		require.Equal(t, "kubeconfig", rt.Spec.Provider)
		require.Equal(t, "qleet-system", rt.Labels["qleetos.io/up"])
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, rt.ID, n.Annotations[annUpRuntime])
		tokenIDs = strings.Split(n.Annotations[annUpTokens], ",")
		require.Len(t, tokenIDs, 2, "the controllers' token and the context's")
		// The control plane reaches the cluster with it.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		rt, err = admin.KubernetesRuntimes().WaitReconciled(wctx, rt.ID)
		require.NoError(t, err)
		require.Positive(t, rt.Status.NodesReady)
	})

	t.Run("a second up refuses the namespace it made", func(t *testing.T) {
		r := qleetIn(ctx, env, upArgs("qleet-system")...)
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, `namespace "qleet-system" exists`)
	})

	r = qleetIn(ctx, env, "down", "--kubeconfig", sim.Kubeconfig, "--namespace", ns)
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)

	t.Run("down leaves the cluster as up found it; someone else's objects stay", func(t *testing.T) {
		added, removed := diffObjects(before, clusterObjects(ctx, t, kcl))
		require.Empty(t, added, "left behind by down")
		require.Empty(t, removed, "deleted by down")
		s, err := cs.CoreV1().Secrets("team-a").Get(ctx, "qleet-api-tls", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "mine", string(s.Data["x"]))
		_, err = cs.RbacV1().ClusterRoles().Get(ctx, "team-a-reader", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "namespace %s: %v", ns, err)
	})

	t.Run("down deleted the registration, revoked up's tokens and removed the context", func(t *testing.T) {
		_, err := admin.KubernetesRuntimes().GetByName(ctx, "home")
		require.True(t, api.IsNotFound(err), "runtime home: %v", err)
		toks, err := admin.Tokens().List(ctx)
		require.NoError(t, err)
		for _, tk := range toks {
			require.NotContains(t, tokenIDs, tk.ID, "token %s (%s) not revoked", tk.ID, tk.Name)
		}
		var after configFile
		data, err := os.ReadFile(filepath.Join(env["HOME"], ".config", "qleet", "config.yaml"))
		require.NoError(t, err)
		require.NoError(t, yaml.UnmarshalStrict(data, &after))
		require.Nil(t, after.find("qleet-qleet-system"))
		require.Empty(t, after.CurrentContext)
		_, err = os.Stat(cfg.find("qleet-qleet-system").CACert)
		require.ErrorIs(t, err, os.ErrNotExist)
		// The bootstrap admin token (the test's own) is not up's to revoke: the list above was made with it.
	})
}
