package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
	chartfs "github.com/qleetos/terraform-provider-qleet/deploy/helm"
)

// What `qleet up` records on the namespace it makes, so that `qleet down` undoes exactly that.
const (
	// upOwnerKind is the owner kind (kube.LabelOwnerKind) of every object `qleet up` applies.
	upOwnerKind = "bootstrap"
	// annUpRuntime is the id of the kubernetes_runtime `qleet up` registered.
	annUpRuntime = "qleetos.io/up-runtime-id"
	// annUpTokens are the ids of the API tokens `qleet up` made, comma-separated.
	annUpTokens = "qleetos.io/up-token-ids"
	// annUpContext is the CLI context `qleet up` wrote.
	annUpContext = "qleetos.io/up-context"
	// upRelease is the release name the chart is rendered with: objects are qleet-api, qleet-nats, ...
	upRelease = "qleet"
)

// upOwner is the owner of everything `qleet up` applies to the cluster in namespace ns.
func upOwner(ns string) kube.Owner {
	return kube.Owner{InstanceID: "qleet-up-" + ns, Kind: upOwnerKind, Namespace: ns, ClusterScoped: true}
}

// upFlags are the flags `qleet up` and `qleet down` share.
type upFlags struct {
	kubeconfig, kubeContext, namespace string
}

func (f *upFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "the kubeconfig of the cluster (required)")
	cmd.Flags().StringVar(&f.kubeContext, "context", "", "the kubeconfig context (default: its current context)")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "qleet-system", "the namespace of the control plane; up makes it and refuses one that exists")
}

// cluster reads the kubeconfig and connects to the cluster.
func (f *upFlags) cluster() ([]byte, *kube.Cluster, error) {
	if f.kubeconfig == "" {
		return nil, nil, usagef("--kubeconfig is required")
	}
	raw, err := os.ReadFile(f.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	rc, err := kube.RESTConfigFromKubeconfig(raw, f.kubeContext)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig %s: %w", f.kubeconfig, err)
	}
	cl, err := kube.NewCluster(rc)
	if err != nil {
		return nil, nil, err
	}
	return raw, cl, nil
}

type upOptions struct {
	upFlags
	image, valuesFile, chartDir, endpoint, caCert, adminToken, runtime, contextName string
	timeout                                                                         time.Duration
}

func (q *cli) upCmd() *cobra.Command {
	o := &upOptions{}
	cmd := &cobra.Command{
		Use:   "up --kubeconfig FILE --endpoint URL [--namespace qleet-system] [--values FILE] [--image REF]",
		Short: "Install the control plane into a cluster, register the cluster as a runtime, and log in",
		Long: `up installs the QleetOS chart (the one built into this binary: API, controllers, NATS, the agent) into
a new namespace of the cluster, with this release's image, labelling everything it makes as QleetOS's.
PostgreSQL is given by URL in --values (postgresql.url or postgresql.existingSecret); up makes the at-rest
key and the API's TLS certificate (a CA of its own) unless the values give them.

Once the API answers at --endpoint (expose the Service qleet-api, e.g. with a load balancer or
"kubectl -n qleet-system port-forward svc/qleet-api 8443", then --endpoint https://127.0.0.1:8443), up
makes the controllers' token and an admin token, registers the cluster as a kubernetes_runtime (so it
can host workloads too), and writes a CLI context with the endpoint, the CA and the admin token.

The bootstrap admin token comes from --admin-token (or QLEET_BOOTSTRAP_TOKEN), else from
"qleet token create" run in an API pod (kubectl exec). up refuses a namespace or cluster-wide object that
exists already; qleet down removes what up made, and only that.`,
		Example: `  qleet up --kubeconfig ~/.kube/config --values prod.yaml --endpoint https://qleet.example.com:8443
  qleet up --kubeconfig kc.yaml --context prod --values prod.yaml --endpoint https://127.0.0.1:8443 --runtime prod-eu`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return q.up(cmd.Context(), cmd.OutOrStdout(), o) },
	}
	o.add(cmd)
	cmd.Flags().StringVar(&o.image, "image", "", "the qleet image, REPOSITORY:TAG (default: the chart's, ghcr.io/qleetos/qleet:<appVersion>)")
	cmd.Flags().StringVarP(&o.valuesFile, "values", "f", "", "chart values (YAML), e.g. postgresql.url; see deploy/helm/qleet/values.yaml")
	cmd.Flags().StringVar(&o.chartDir, "chart", "", "install this chart directory instead of the one built in")
	cmd.Flags().StringVar(&o.endpoint, "endpoint", "", "where this machine reaches the new API, https://HOST:PORT (required)")
	cmd.Flags().StringVar(&o.caCert, "ca-cert", "", "the CA of --endpoint when it is not the API's own (a load balancer that ends TLS)")
	cmd.Flags().StringVar(&o.adminToken, "admin-token", "", "a bootstrap admin token of the new API (env QLEET_BOOTSTRAP_TOKEN; default: made in an API pod)")
	cmd.Flags().StringVar(&o.runtime, "runtime", "home", "the name of the kubernetes_runtime the cluster is registered as")
	cmd.Flags().StringVar(&o.contextName, "name", "", "the name of the CLI context (default: qleet-<namespace>)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait for the API to answer")
	return cmd
}

func (q *cli) up(ctx context.Context, out io.Writer, o *upOptions) error {
	if o.endpoint == "" {
		return usagef("up: --endpoint is required: where this machine will reach the API (see qleet up --help)")
	}
	if u, err := url.Parse(o.endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("up: --endpoint must be an http or https URL, e.g. https://127.0.0.1:8443")
	}
	if o.contextName == "" {
		o.contextName = "qleet-" + o.namespace
	}
	if o.adminToken == "" {
		o.adminToken = q.getenv("QLEET_BOOTSTRAP_TOKEN")
	}
	raw, cl, err := o.cluster()
	if err != nil {
		return err
	}
	defer cl.Close()
	ns, owner := o.namespace, upOwner(o.namespace)

	vals, err := readValues(o.valuesFile)
	if err != nil {
		return err
	}
	chrt, err := loadChart(o.chartDir)
	if err != nil {
		return err
	}
	var extra []*unstructured.Unstructured
	var caPEM []byte
	if err := setImage(vals, o.image); err != nil {
		return err
	}
	if !has(vals, "secretKey.key") && !has(vals, "secretKey.existingSecret") {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		setValue(vals, "secretKey.key", base64.StdEncoding.EncodeToString(key))
	}
	if !has(vals, "tls.secretName") && !has(vals, "tls.certManager.enabled") {
		ca, secret, err := apiTLS(upRelease+"-api", ns, o.endpoint)
		if err != nil {
			return err
		}
		caPEM = ca
		extra = append(extra, secret)
	}
	controllerSecret := ""
	if !has(vals, "controller.token") && !has(vals, "controller.existingSecret") {
		controllerSecret = upRelease + "-controller-token"
		setValue(vals, "controller.existingSecret", controllerSecret)
	}
	if agent, _ := vals["agent"].(map[string]any); agent == nil || agent["enabled"] == nil {
		setValue(vals, "agent.enabled", true)
		setValue(vals, "agent.runtime", o.runtime)
	}

	manifest, err := render.Template(chrt, vals, upRelease, ns, "")
	if err != nil {
		return fmt.Errorf("up: chart: %w", err)
	}
	objs, err := render.ParseManifests(manifest)
	if err != nil {
		return fmt.Errorf("up: chart: %w", err)
	}

	// Refuse what exists: the namespace, and any cluster-wide object of the chart.
	if _, err := cl.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		return fmt.Errorf("up: namespace %q exists; up installs into a namespace of its own (choose another with --namespace, or qleet down first if up made it)", ns)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("up: namespace %q: %w", ns, err)
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("up: %s: %w", gvk.Kind, err)
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			continue
		}
		if _, err := cl.Dynamic.Resource(m.Resource).Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
			return fmt.Errorf("up: %s %q exists in the cluster and is not up's to replace; remove it or install with another release", gvk.Kind, obj.GetName())
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("up: %s %q: %w", gvk.Kind, obj.GetName(), err)
		}
	}

	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{
		"name": ns, "annotations": map[string]any{annUpContext: o.contextName}}}}
	all := append(append([]*unstructured.Unstructured{nsObj}, extra...), objs...)
	kube.SortForApply(all)
	if _, err := kube.Apply(ctx, cl, owner, all); err != nil {
		return fmt.Errorf("up: apply: %w (qleet down removes what was applied)", err)
	}
	fmt.Fprintf(out, "installed the chart %s (image %s) in namespace %s: %d objects\n", chrt.Metadata.Version, imageOf(objs), ns, len(all))

	// The API: wait for it, then make the tokens, the registration and the context.
	if o.caCert != "" {
		if caPEM, err = os.ReadFile(o.caCert); err != nil {
			return fmt.Errorf("--ca-cert: %w", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if o.adminToken == "" {
		fmt.Fprintf(out, "waiting for an API pod to make an admin token...\n")
		// The exec stream gets a REST config of its own: the cluster's wraps requests in a timeout.
		rc, err := kube.RESTConfigFromKubeconfig(raw, o.kubeContext)
		if err != nil {
			return err
		}
		if o.adminToken, err = tokenFromPod(wctx, cl, rc, ns, "qleet-up-bootstrap"); err != nil {
			return fmt.Errorf("up: bootstrap admin token: %w (give one with --admin-token)", err)
		}
	}
	opts := []client.Option{client.WithToken(o.adminToken), client.WithUserAgent("qleet-up/" + buildVersion().Version)}
	if caPEM != nil {
		opts = append(opts, client.WithCACert(caPEM))
	}
	api0, err := client.New(o.endpoint, opts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "waiting for the API at %s...\n", o.endpoint)
	if err := waitAPI(wctx, api0); err != nil {
		return fmt.Errorf("up: the API at %s did not answer: %w (the chart stays installed; qleet down removes it)", o.endpoint, q.explain(err))
	}
	var tokenIDs []string
	record := func() error { // the namespace remembers what down must undo in the API
		return annotate(ctx, cl, ns, map[string]string{annUpTokens: strings.Join(tokenIDs, ",")})
	}
	if controllerSecret != "" {
		tok, err := api0.Tokens().Create(ctx, api.TokenRequest{Name: "controller", Role: api.RoleController})
		if err != nil {
			return fmt.Errorf("up: controller token: %w", err)
		}
		tokenIDs = append(tokenIDs, tok.ID)
		if err := record(); err != nil {
			return err
		}
		sec := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": controllerSecret, "namespace": ns},
			"type": "Opaque", "stringData": map[string]any{"token": tok.Token}}}
		if _, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{sec}); err != nil {
			return fmt.Errorf("up: controller token Secret: %w", err)
		}
	}
	admin, err := api0.Tokens().Create(ctx, api.TokenRequest{Name: o.contextName, Role: api.RoleAdmin})
	if err != nil {
		return fmt.Errorf("up: admin token: %w", err)
	}
	tokenIDs = append(tokenIDs, admin.ID)
	if err := record(); err != nil {
		return err
	}
	mini, err := minifyKubeconfig(raw, o.kubeContext)
	if err != nil {
		return err
	}
	rt, err := api0.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{
		Meta: api.Meta{Name: o.runtime, Labels: map[string]string{"qleetos.io/up": ns}},
		Spec: api.KubernetesRuntimeSpec{Provider: "kubeconfig", Kubeconfig: string(mini)}})
	if err != nil {
		return fmt.Errorf("up: register the cluster as kubernetes_runtime %q: %w", o.runtime, err)
	}
	if err := annotate(ctx, cl, ns, map[string]string{annUpRuntime: rt.ID}); err != nil {
		return err
	}
	fmt.Fprintf(out, "registered the cluster as kubernetes_runtime %q (%s)\n", rt.Name, rt.ID)

	cfg, path, err := q.loadConfig()
	if err != nil {
		return err
	}
	ctxt := configContext{Name: o.contextName, Endpoint: o.endpoint, Token: admin.Token}
	if caPEM != nil {
		ctxt.CACert = filepath.Join(filepath.Dir(path), o.contextName+"-ca.crt")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(ctxt.CACert, caPEM, 0o600); err != nil {
			return fmt.Errorf("CA certificate: %w", err)
		}
	}
	if c := cfg.find(o.contextName); c != nil {
		*c = ctxt
	} else {
		cfg.Contexts = append(cfg.Contexts, ctxt)
	}
	cfg.CurrentContext = o.contextName
	if err := saveConfig(path, cfg); err != nil {
		return err
	}
	fmt.Fprintf(out, "context %q is current (%s); revoke the bootstrap admin token when you are done: qleet token list\n", o.contextName, path)
	return nil
}

// waitAPI polls the API until it answers a list with the token.
func waitAPI(ctx context.Context, cl *client.Client) error {
	for {
		_, err := cl.KubernetesRuntimes().List(ctx, client.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if api.IsUnauthorized(err) || api.IsForbidden(err) {
			return err // a wrong token does not get better
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(2 * time.Second):
		}
	}
}

// tokenFromPod runs `qleet token create` in a running API pod, which uses the admin token the API wrote
// into its data dir, and returns the new admin token.
func tokenFromPod(ctx context.Context, cl *kube.Cluster, rc *rest.Config, ns, name string) (string, error) {
	sel := "app.kubernetes.io/instance=" + upRelease + ",app.kubernetes.io/component=api"
	for {
		pods, err := cl.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return "", err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				continue
			}
			req := cl.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(p.Name).SubResource("exec").
				VersionedParams(&corev1.PodExecOptions{Container: "api", Command: []string{"qleet", "token", "create", "--name", name, "--role", api.RoleAdmin}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
			exec, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
			if err != nil {
				return "", err
			}
			var stdout, stderr bytes.Buffer
			if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
				if ctx.Err() != nil {
					return "", fmt.Errorf("%w: %s", err, stderr.String())
				}
				continue // the API in this pod may not answer yet
			}
			if tok := strings.TrimSpace(stdout.String()); tok != "" {
				return tok, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no running API pod made a token in %s: %w", ns, ctx.Err())
		case <-time.After(3 * time.Second):
		}
	}
}

// annotate merges annotations into the namespace.
func annotate(ctx context.Context, cl *kube.Cluster, ns string, ann map[string]string) error {
	n, err := cl.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	for k, v := range ann {
		n.Annotations[k] = v
	}
	if _, err := cl.Clientset.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{FieldManager: kube.FieldManager}); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

// minifyKubeconfig keeps only the context up installed into (and its cluster and user), with the files it
// names inlined: the control plane gets that cluster's credentials and no others.
func minifyKubeconfig(raw []byte, kubeContext string) ([]byte, error) {
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	if kubeContext != "" {
		cfg.CurrentContext = kubeContext
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return clientcmd.Write(*cfg)
}

// loadChart loads dir, or the chart built into the binary.
func loadChart(dir string) (*chart.Chart, error) {
	if dir != "" {
		c, err := loader.Load(dir)
		if err != nil {
			return nil, fmt.Errorf("--chart: %w", err)
		}
		return c, nil
	}
	var files []*loader.BufferedFile
	err := fs.WalkDir(chartfs.Chart, "qleet", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := chartfs.Chart.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(p, "qleet/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loader.LoadFiles(files)
}

// readValues reads a values file; none is empty values.
func readValues(path string) (map[string]any, error) {
	vals := map[string]any{}
	if path == "" {
		return vals, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--values: %w", err)
	}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		return nil, fmt.Errorf("--values %s: %w", path, err)
	}
	if vals == nil {
		vals = map[string]any{}
	}
	return vals, nil
}

// setImage sets image.repository and image.tag from REPOSITORY:TAG.
func setImage(vals map[string]any, ref string) error {
	if ref == "" {
		return nil
	}
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") || i == len(ref)-1 {
		return usagef("--image %q: must be REPOSITORY:TAG, e.g. ghcr.io/qleetos/qleet:0.1.0", ref)
	}
	setValue(vals, "image.repository", ref[:i])
	setValue(vals, "image.tag", ref[i+1:])
	return nil
}

// has reports whether a dotted key has a non-empty value.
func has(vals map[string]any, key string) bool {
	var v any = vals
	for _, p := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		v = m[p]
	}
	return v != nil && v != "" && v != false
}

// setValue sets a dotted key, making the maps on the way.
func setValue(vals map[string]any, key string, v any) {
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
}

// imageOf is the image of the first container of the rendered objects.
func imageOf(objs []*unstructured.Unstructured) string {
	for _, o := range objs {
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok {
				return fmt.Sprint(m["image"])
			}
		}
	}
	return ""
}

// apiTLS makes a CA and a serving certificate for the API Service's names, localhost (port-forward) and
// the endpoint's host, and returns the CA's PEM and the kubernetes.io/tls Secret the chart mounts.
func apiTLS(service, ns, endpoint string) ([]byte, *unstructured.Unstructured, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "qleet-up CA " + ns},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	dns := []string{service, service + "." + ns, service + "." + ns + ".svc", service + "." + ns + ".svc.cluster.local", "localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if u, err := url.Parse(endpoint); err == nil && u.Hostname() != "" {
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, u.Hostname())
		}
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: service + "." + ns + ".svc"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(2, 0, 0), DNSNames: dns, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": map[string]any{"name": service + "-tls", "namespace": ns},
		"stringData": map[string]any{
			"tls.crt": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			"tls.key": string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})),
			"ca.crt":  string(caPEM),
		},
	}}
	return caPEM, secret, nil
}
