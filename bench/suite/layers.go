package suite

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/bench/report"
	"github.com/qleetos/terraform-provider-qleet/bench/stats"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// The layers apply's app: the quickstart's shape (a runtime profile, a definition with a port, an
// instance placed in the profile's region, a gateway with a host and so TLS) plus a database.
const (
	layersRegion   = "eu-west"
	layersApp      = "hello"
	layersDB       = "main"
	layersHost     = "hello.example.test"
	layersReplicas = 2
	layersTimeout  = 4 * time.Minute
	// layersPoll is how often the direct method looks at what it waits for: well under every QleetOS
	// hop, so that the direct figure is the floor.
	layersPoll = 100 * time.Millisecond
)

// The layers, in the order the direct method makes them.
const (
	layerCluster  = "cluster (kubesim from the profile, nodes Ready)"
	layerSupport  = "support services (ingress, cert-manager + ClusterIssuer)"
	layerDatabase = "database (StatefulSet Ready)"
	layerApp      = "app (Deployment Available, database env)"
	layerGateway  = "gateway (Ingress address, certificate issued)"
)

var layerOrder = []string{layerCluster, layerSupport, layerDatabase, layerApp, layerGateway}

var (
	gvrCertificates   = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	gvrClusterIssuers = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuers"}
	gvrIngresses      = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	gvrNamespaces     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrSecrets        = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrServices       = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrStatefulSets   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
)

func (r *Runner) runLayers(ctx context.Context) error {
	res := &report.LayersResult{}
	r.res.Layers = res
	defer r.profileCPU(SectionLayers)()
	if err := r.layersApply(ctx, res); err != nil {
		res.Notes = append(res.Notes, "apply: "+err.Error())
		r.log.Error("layers apply", "err", err)
	}
	if err := r.layersPlanAndGraph(ctx, res); err != nil {
		res.Notes = append(res.Notes, "plan and graph: "+err.Error())
		return err
	}
	return nil
}

// layerClock records when each layer was Ready, from the start of a round.
type layerClock map[string]time.Duration

// layersApply runs the app with no infrastructure through both methods, LayersRounds rounds each, the
// order alternating.
func (r *Runner) layersApply(ctx context.Context, res *report.LayersResult) error {
	if _, err := os.Stat(r.cfg.KubesimBinary); err != nil {
		return fmt.Errorf("kubesim binary: %w", err)
	}
	methods := []struct {
		name string
		run  func(ctx context.Context, round int) (layerClock, time.Duration, error)
	}{
		{report.MethodLayersDirect, r.layersDirect},
		{report.MethodLayersQleet, r.layersQleet},
	}
	totals := make([][]time.Duration, len(methods))
	clocks := make([][]layerClock, len(methods))
	errs := make([]int, len(methods))
	for round := range r.cfg.LayersRounds {
		for _, mi := range rotation(len(methods), round) {
			m := methods[mi]
			r.log.Info("layers apply round", "method", m.name, "round", round)
			rctx, cancel := context.WithTimeout(ctx, layersTimeout+2*time.Minute)
			clock, total, err := m.run(rctx, round)
			cancel()
			if err != nil {
				errs[mi]++
				r.log.Warn("layers apply failed", "method", m.name, "round", round, "err", err)
				res.Notes = append(res.Notes, fmt.Sprintf("%s, round %d: %v", m.name, round, err))
				continue
			}
			r.log.Info("layers apply round done", "method", m.name, "round", round, "total", total.Round(time.Millisecond))
			totals[mi] = append(totals[mi], total)
			clocks[mi] = append(clocks[mi], clock)
		}
	}
	var base float64
	for mi, m := range methods {
		row := report.LayersApplyRow{Method: m.name, Rounds: r.cfg.LayersRounds, Errors: errs[mi]}
		row.Total = stats.Summarize(totals[mi])
		row.SamplesMS = stats.MS(totals[mi])
		for _, l := range layerOrder {
			var at []time.Duration
			for _, c := range clocks[mi] {
				if d, ok := c[l]; ok {
					at = append(at, d)
				}
			}
			if len(at) == 0 {
				continue
			}
			s := stats.Summarize(at)
			row.Layers = append(row.Layers, report.LayerTime{Layer: l, DoneAtMS: s.P50MS, MaxMS: s.MaxMS})
		}
		if mi == 0 {
			base = row.Total.P50MS
		}
		row.RatioP50 = stats.Ratio(row.Total.P50MS, base)
		res.Apply = append(res.Apply, row)
	}
	return nil
}

// layersDirect does, one step after another, what QleetOS does for the app: it starts a kubesim cluster
// with the profile's spec, installs the same support charts with the Helm SDK (helm install), creates
// the ClusterIssuer, the database's objects, the app's objects with the database's details, then the
// Certificate and the Ingress, waiting for each to be Ready before the next.
func (r *Runner) layersDirect(ctx context.Context, round int) (layerClock, time.Duration, error) {
	clock := layerClock{}
	dir := filepath.Join(r.cfg.WorkDir, fmt.Sprintf("layers-direct-%d", round))
	defer os.RemoveAll(dir)
	start := time.Now()
	mark := func(layer string) { clock[layer] = time.Since(start) }

	// The cluster: what the supervisor does for a local runtime of the profile (kubesim.Start returns
	// when every node is Ready), then the connection and the version and node reads a runtime's
	// reconcile makes.
	sim, err := kubesim.Start(ctx, kubesim.Config{Binary: r.cfg.KubesimBinary, DataDir: dir, Name: "direct", Region: layersRegion, Nodes: 1})
	if err != nil {
		return nil, 0, fmt.Errorf("start kubesim: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = sim.Stop(sctx)
	}()
	raw, err := os.ReadFile(sim.Kubeconfig)
	if err != nil {
		return nil, 0, err
	}
	rc, err := kube.RESTConfigFromKubeconfig(raw, "")
	if err != nil {
		return nil, 0, err
	}
	rc.QPS, rc.Burst = 100, 200
	kc, err := kube.NewCluster(rc)
	if err != nil {
		return nil, 0, err
	}
	if _, err := kc.Clientset.Discovery().ServerVersion(); err != nil {
		return nil, 0, fmt.Errorf("server version: %w", err)
	}
	if _, err := kc.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		return nil, 0, fmt.Errorf("list nodes: %w", err)
	}
	mark(layerCluster)

	// Support services: helm install of the same local charts into the same namespaces, then the
	// ClusterIssuer gateways name; each waited for.
	charts := filepath.Join(r.cfg.RepoRoot, "charts", "support")
	for _, typ := range []string{api.SupportIngress, api.SupportCertManager} {
		ns := api.SupportCharts[typ].Namespace
		if err := helmInstall(ctx, sim.Kubeconfig, filepath.Join(charts, typ), "qleet-"+typ, ns); err != nil {
			return nil, 0, err
		}
		if err := waitDeploymentsAvailable(ctx, kc, ns); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", typ, err)
		}
	}
	issuer := obj("cert-manager.io/v1", "ClusterIssuer", "", api.ClusterIssuerName, map[string]any{"spec": map[string]any{"selfSigned": map[string]any{}}})
	if err := applyGVR(ctx, kc, gvrClusterIssuers, issuer); err != nil {
		return nil, 0, err
	}
	if err := pollUntil(ctx, func(ctx context.Context) (bool, error) {
		u, err := kc.Dynamic.Resource(gvrClusterIssuers).Get(ctx, api.ClusterIssuerName, metav1.GetOptions{})
		return err == nil && u != nil, nil
	}); err != nil {
		return nil, 0, fmt.Errorf("cluster issuer: %w", err)
	}
	mark(layerSupport)

	// The database: its namespace, generated credentials, Service and StatefulSet (the shape the data
	// controller applies), waited until the StatefulSet is Ready.
	dbNS := render.DatabaseNamespace(layersDB)
	eng := render.EngineOf(&api.DatabaseSpec{})
	password := randomHex(12)
	labels := map[string]any{"app.kubernetes.io/name": "db"}
	dbObjs := []struct {
		gvr schema.GroupVersionResource
		u   *unstructured.Unstructured
	}{
		{gvrNamespaces, obj("v1", "Namespace", "", dbNS, nil)},
		{gvrSecrets, obj("v1", "Secret", dbNS, render.DatabaseCredentialsSecret, map[string]any{"type": "Opaque",
			"stringData": map[string]any{"username": "app", "password": password, "database": "app"}})},
		{gvrServices, obj("v1", "Service", dbNS, "db", map[string]any{"spec": map[string]any{"selector": labels,
			"ports": []any{map[string]any{"name": "main", "port": int64(eng.Port), "targetPort": int64(eng.Port)}}}})},
		{gvrStatefulSets, obj("apps/v1", "StatefulSet", dbNS, "db", map[string]any{"spec": map[string]any{
			"serviceName": "db", "replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{"containers": []any{map[string]any{
				"name": "main", "image": eng.Image, "ports": []any{map[string]any{"containerPort": int64(eng.Port)}},
				"env": []any{
					secretEnv("POSTGRES_DB", render.DatabaseCredentialsSecret, "database"),
					secretEnv("POSTGRES_PASSWORD", render.DatabaseCredentialsSecret, "password"),
					secretEnv("POSTGRES_USER", render.DatabaseCredentialsSecret, "username"),
				},
				"volumeMounts": []any{map[string]any{"name": "data", "mountPath": eng.DataDir}}}}}},
			"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "data"}, "spec": map[string]any{
				"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}},
		}})},
	}
	for _, o := range dbObjs {
		if err := applyGVR(ctx, kc, o.gvr, o.u); err != nil {
			return nil, 0, err
		}
	}
	if err := pollUntil(ctx, func(ctx context.Context) (bool, error) {
		s, err := kc.Clientset.AppsV1().StatefulSets(dbNS).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return s.Status.ObservedGeneration >= s.Generation && s.Status.ReadyReplicas >= 1 && s.Status.UpdatedReplicas >= 1, nil
	}); err != nil {
		return nil, 0, fmt.Errorf("database: %w", err)
	}
	mark(layerDatabase)

	// The app: QleetOS's own rendering of the definition (Namespace, Deployment, Service), the database's
	// details as a Secret in its namespace and env from it, waited until Available.
	def := layersDefinition()
	objs, err := renderDirect(ctx, def, layersApp, "")
	if err != nil {
		return nil, 0, err
	}
	host := "db." + dbNS + ".svc.cluster.local"
	conn := obj("v1", "Secret", layersApp, "qleet-database-"+layersDB, map[string]any{"type": "Opaque", "stringData": map[string]any{
		"DATABASE_URL":  api.DatabaseURL(eng.Scheme, "app", password, host, eng.Port, "app"),
		"DATABASE_HOST": host, "DATABASE_PORT": fmt.Sprint(eng.Port), "DATABASE_NAME": "app", "DATABASE_USER": "app", "DATABASE_PASSWORD": password,
	}})
	var env []any
	for _, k := range []string{"DATABASE_URL", "DATABASE_HOST", "DATABASE_PORT", "DATABASE_NAME", "DATABASE_USER", "DATABASE_PASSWORD"} {
		env = append(env, secretEnv(k, conn.GetName(), k))
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range cs {
				c.(map[string]any)["env"] = env
			}
			if err := unstructured.SetNestedSlice(o.Object, cs, "spec", "template", "spec", "containers"); err != nil {
				return nil, 0, err
			}
		}
	}
	objs = slices.Insert(objs, 1, conn)
	if err := ssa(ctx, kc, objs); err != nil {
		return nil, 0, err
	}
	if err := waitDeploymentsAvailable(ctx, kc, layersApp); err != nil {
		return nil, 0, fmt.Errorf("app: %w", err)
	}
	mark(layerApp)

	// The gateway: a Certificate from the ClusterIssuer and an Ingress of the qleet class (the gateway
	// controller's shape), waited until the route has an address and the certificate is issued.
	cert := obj("cert-manager.io/v1", "Certificate", layersApp, layersApp, map[string]any{"spec": map[string]any{
		"secretName": layersApp + "-tls", "dnsNames": []any{layersHost},
		"issuerRef": map[string]any{"name": api.ClusterIssuerName, "kind": "ClusterIssuer", "group": "cert-manager.io"}}})
	ing := obj("networking.k8s.io/v1", "Ingress", layersApp, layersApp, map[string]any{"spec": map[string]any{
		"ingressClassName": api.IngressClassName,
		"tls":              []any{map[string]any{"hosts": []any{layersHost}, "secretName": layersApp + "-tls"}},
		"rules": []any{map[string]any{"host": layersHost, "http": map[string]any{"paths": []any{map[string]any{"path": "/", "pathType": "Prefix",
			"backend": map[string]any{"service": map[string]any{"name": layersApp, "port": map[string]any{"number": int64(80)}}}}}}}},
	}})
	ing.SetAnnotations(map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "true", "nginx.ingress.kubernetes.io/force-ssl-redirect": "true"})
	if err := applyGVR(ctx, kc, gvrCertificates, cert); err != nil {
		return nil, 0, err
	}
	if err := applyGVR(ctx, kc, gvrIngresses, ing); err != nil {
		return nil, 0, err
	}
	if err := pollUntil(ctx, func(ctx context.Context) (bool, error) {
		i, err := kc.Clientset.NetworkingV1().Ingresses(layersApp).Get(ctx, layersApp, metav1.GetOptions{})
		if err != nil || len(i.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		c, err := kc.Dynamic.Resource(gvrCertificates).Namespace(layersApp).Get(ctx, layersApp, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
		for _, raw := range conds {
			if cm, _ := raw.(map[string]any); cm["type"] == "Ready" && cm["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return nil, 0, fmt.Errorf("gateway: %w", err)
	}
	mark(layerGateway)
	return clock, time.Since(start), nil
}

// layersQleet declares the same app through the API on a fresh control plane (so that the cluster is
// provisioned from the profile) and waits until the instance and the gateway are Ready. When each layer
// was Ready comes from the objects' first Reconciled events.
func (r *Runner) layersQleet(ctx context.Context, round int) (layerClock, time.Duration, error) {
	dir := filepath.Join(r.cfg.WorkDir, fmt.Sprintf("layers-cp-%d", round))
	defer os.RemoveAll(dir)
	cp, err := r.startControlPlane(ctx, app.Config{DataDir: dir, API: true, Controllers: true,
		KubesimBinary: r.cfg.KubesimBinary, SupportChartDir: filepath.Join(r.cfg.RepoRoot, "charts", "support")})
	if err != nil {
		return nil, 0, err
	}
	defer cp.close() // stops the local cluster too
	cl := cp.client

	// The declarations are five creates: a minute for them all, so that an API that does not answer fails
	// the round soon instead of holding it for the whole wait.
	cctx, ccancel := context.WithTimeout(ctx, time.Minute)
	defer ccancel()
	start := time.Now()
	if _, err := cl.RuntimeProfiles().Create(cctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{layersRegion}, Nodes: 1}}); err != nil {
		return nil, 0, fmt.Errorf("create profile: %w", err)
	}
	def, err := cl.WorkloadDefinitions().Create(cctx, layersDefinition())
	if err != nil {
		return nil, 0, fmt.Errorf("create definition: %w", err)
	}
	inst, err := cl.WorkloadInstances().Create(cctx, &api.WorkloadInstance{Meta: api.Meta{Name: layersApp},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{layersRegion}}}})
	if err != nil {
		return nil, 0, fmt.Errorf("create instance: %w", err)
	}
	db, err := cl.Databases().Create(cctx, &api.Database{Meta: api.Meta{Name: layersDB}, Spec: api.DatabaseSpec{InstanceID: inst.ID}})
	if err != nil {
		return nil, 0, fmt.Errorf("create database: %w", err)
	}
	gw, err := cl.Gateways().Create(cctx, &api.Gateway{Meta: api.Meta{Name: layersApp}, Spec: api.GatewaySpec{InstanceID: inst.ID, Hosts: []string{layersHost}}})
	if err != nil {
		return nil, 0, fmt.Errorf("create gateway: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, layersTimeout)
	defer cancel()
	if _, err := cl.WorkloadInstances().WaitReconciled(wctx, inst.ID); err != nil {
		return nil, 0, fmt.Errorf("instance: %w", err)
	}
	if _, err := cl.Gateways().WaitReconciled(wctx, gw.ID); err != nil {
		return nil, 0, fmt.Errorf("gateway: %w", err)
	}
	// The database as well, as the direct method waits for it: it is Ready once with nothing to run,
	// so wait for it to run in its home.
	if err := pollUntil(wctx, func(ctx context.Context) (bool, error) {
		got, err := cl.Databases().Get(ctx, db.ID)
		if err != nil || !api.Reconciled(got.Generation, &got.Status.Status) || got.Status.Home == nil {
			return false, err
		}
		for _, rs := range got.Status.Runtimes {
			if rs.RuntimeID == got.Status.Home.RuntimeID && rs.Phase == api.PhaseReady {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return nil, 0, fmt.Errorf("database: %w", err)
	}
	total := time.Since(start)

	clock := layerClock{}
	// readyAt is the first Reconciled event of an object at or after from. A database is Ready once
	// with nothing to run, before its instance has a placement (and so before any cluster), and again
	// once its StatefulSet runs on the instance's cluster: its layer is the first Reconciled event
	// after the cluster's. The second is counted into the first (same reason and message), so an
	// event's last occurrence (LastTimestamp) is looked at too.
	readyAt := func(events func(context.Context, string) ([]api.Event, error), id string, from time.Duration) (time.Duration, bool) {
		evs, err := events(ctx, id)
		if err != nil {
			return 0, false
		}
		for _, e := range evs {
			if e.Reason != "Reconciled" {
				continue
			}
			if d := e.CreatedAt.Sub(start); d >= from {
				return d, true
			}
			if e.LastTimestamp != nil {
				if d := e.LastTimestamp.Sub(start); d >= from {
					return d, true
				}
			}
		}
		return 0, false
	}
	for rt, err := range cl.KubernetesRuntimes().All(ctx, client.ListOptions{}) {
		if err != nil {
			break
		}
		if d, ok := readyAt(cl.KubernetesRuntimes().Events, rt.ID, 0); ok {
			clock[layerCluster] = max(clock[layerCluster], d)
		}
	}
	for ss, err := range cl.SupportServices().All(ctx, client.ListOptions{}) {
		if err != nil {
			break
		}
		if d, ok := readyAt(cl.SupportServices().Events, ss.ID, 0); ok {
			clock[layerSupport] = max(clock[layerSupport], d)
		}
	}
	if cluster, ok := clock[layerCluster]; ok {
		if d, ok := readyAt(cl.Databases().Events, db.ID, cluster); ok {
			clock[layerDatabase] = d
		}
	}
	if d, ok := readyAt(cl.WorkloadInstances().Events, inst.ID, 0); ok {
		clock[layerApp] = d
	}
	clock[layerGateway] = total
	if d, ok := readyAt(cl.Gateways().Events, gw.ID, 0); ok {
		clock[layerGateway] = d
	}
	return clock, total, nil
}

// layersDefinition is the app's definition: one container with a port, layersReplicas replicas.
func layersDefinition() *api.WorkloadDefinition {
	n := int32(layersReplicas)
	return &api.WorkloadDefinition{Meta: api.Meta{Name: layersApp}, Spec: api.WorkloadDefinitionSpec{
		Containers: []api.Container{{Name: "web", Image: benchImage, Ports: []api.ContainerPort{{ContainerPort: 80}}}},
		Replicas:   &n,
	}}
}

// helmInstall runs `helm install release chartDir -n namespace --create-namespace` with the Helm SDK
// (CRDs first, a release Secret, no --wait: the caller waits the way the other steps do).
func helmInstall(ctx context.Context, kubeconfig, chartDir, release, namespace string) error {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &namespace
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, namespace, "secret", func(string, ...any) {}); err != nil {
		return fmt.Errorf("helm init: %w", err)
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		return fmt.Errorf("helm load %s: %w", chartDir, err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = release, namespace, true
	if _, err := in.RunWithContext(ctx, ch, map[string]any{}); err != nil {
		return fmt.Errorf("helm install %s: %w", release, err)
	}
	return nil
}

// waitDeploymentsAvailable waits until the namespace has Deployments and every one is Available.
func waitDeploymentsAvailable(ctx context.Context, kc *kube.Cluster, ns string) error {
	return pollUntil(ctx, func(ctx context.Context) (bool, error) {
		list, err := kc.Clientset.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(list.Items) > 0 && !slices.ContainsFunc(list.Items, func(d appsv1.Deployment) bool { return !available(&d) }), nil
	})
}

// pollUntil calls done every layersPoll until it says true, returns an error or ctx (bounded by
// layersTimeout) ends. Errors of a single look are retried: the object may not exist yet.
func pollUntil(ctx context.Context, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, layersTimeout)
	defer cancel()
	var last error
	for {
		ok, err := done(ctx)
		if ok {
			return nil
		}
		last = cmp.Or(err, last)
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(layersPoll):
		}
	}
}

// applyGVR server-side applies one object to a resource named explicitly (no discovery: CRDs installed
// a moment ago need none).
func applyGVR(ctx context.Context, kc *kube.Cluster, gvr schema.GroupVersionResource, u *unstructured.Unstructured) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "qleet-bench", Force: &force}
	ri := kc.Dynamic.Resource(gvr)
	if u.GetNamespace() != "" {
		_, err = ri.Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
	} else {
		_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
	}
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// obj builds an object from its type, namespace, name and the rest of its fields.
func obj(apiVersion, kind, namespace, name string, rest map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range rest {
		u.Object[k] = v
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

func secretEnv(name, secret, key string) map[string]any {
	return map[string]any{"name": name, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": secret, "key": key}}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// layersPlanAndGraph measures the plan preview of the quickstart as the store grows (empty, then
// LayersPlanObjects objects, then LayersGraphObjects) and GET /v1/graph at LayersGraphObjects. The
// control plane runs without controllers, so that filling the store costs only the writes.
func (r *Runner) layersPlanAndGraph(ctx context.Context, res *report.LayersResult) error {
	cp, err := r.startControlPlane(ctx, app.Config{DataDir: filepath.Join(r.cfg.WorkDir, "layers-graph"), API: true})
	if err != nil {
		return err
	}
	defer cp.close()
	cl := cp.client
	hc := pooledHTTPClient()
	endpoint, token := cp.app.Endpoint, cp.app.AdminToken

	planBody, err := quickstartPlan()
	if err != nil {
		return err
	}
	measurePlan := func(objects, rounds int) {
		row := report.PlanLatencyRow{StoreObjects: objects, Rounds: rounds}
		var samples []time.Duration
		for i := range rounds + 1 { // the first is a warm-up
			t0 := time.Now()
			body, err := rawRequest(ctx, hc, http.MethodPost, endpoint+"/v1/plans", token, planBody)
			d := time.Since(t0)
			if err != nil {
				row.Errors++
				res.Notes = append(res.Notes, fmt.Sprintf("plan at %d objects: %v", objects, err))
				continue
			}
			if i == 0 {
				var pr api.PlanResult
				if err := json.Unmarshal(body, &pr); err == nil {
					row.PlannedObjects = len(pr.Graph.Nodes)
				}
				row.ResponseBytes = len(body)
				continue
			}
			samples = append(samples, d)
		}
		row.Latency = stats.Summarize(samples)
		r.log.Info("plan preview", "store_objects", objects, "p50_ms", row.Latency.P50MS, "p99_ms", row.Latency.P99MS)
		res.Plan = append(res.Plan, row)
	}

	measurePlan(0, r.cfg.LayersPlanRounds)

	// The store: local runtimes (not started: no controllers), one definition, instances pinned to the
	// runtimes round-robin. Runtimes sit in regions the quickstart does not ask for, so that its plan
	// still provisions its own.
	const runtimes = 5
	var rtIDs []string
	for i := range runtimes {
		rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: fmt.Sprintf("graph-%d", i)},
			Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal, Region: fmt.Sprintf("bench-%d", i)}})
		if err != nil {
			return fmt.Errorf("create runtime: %w", err)
		}
		rtIDs = append(rtIDs, rt.ID)
	}
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "graph-web"}, Spec: definitionSpec(1)})
	if err != nil {
		return fmt.Errorf("create definition: %w", err)
	}
	stored := runtimes + 1
	fill := func(to int) error {
		n := to - stored
		if n <= 0 {
			return nil
		}
		t0 := time.Now()
		var mu sync.Mutex
		var firstErr error
		sem := make(chan struct{}, 32)
		var wg sync.WaitGroup
		for i := range n {
			idx := stored + i
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				_, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: fmt.Sprintf("g%05d", idx)},
					Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rtIDs[idx%runtimes]}})
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		stored = to
		r.log.Info("layers store filled", "objects", to, "took", time.Since(t0).Round(time.Millisecond))
		return firstErr
	}
	if err := fill(r.cfg.LayersPlanObjects); err != nil {
		return fmt.Errorf("fill the store: %w", err)
	}
	r.waitQuiet(ctx, 0.25, time.Minute)
	measurePlan(stored, r.cfg.LayersPlanRounds)
	if err := fill(r.cfg.LayersGraphObjects); err != nil {
		return fmt.Errorf("fill the store: %w", err)
	}

	// The outbox relay publishes a notification per create: measure once it has caught up, not while it
	// competes for the CPU.
	r.waitQuiet(ctx, 0.25, 2*time.Minute)
	queries := []struct{ name, query string }{
		{"whole graph", ""},
		{"root: one instance", "?root=" + url.QueryEscape("workload_instance/g00010")},
		{"root: the definition every instance uses", "?root=" + url.QueryEscape("workload_definition/graph-web")},
	}
	for _, q := range queries {
		row := report.GraphRow{Query: q.name, Objects: stored, Rounds: r.cfg.LayersGraphRounds}
		var samples []time.Duration
		for i := range r.cfg.LayersGraphRounds + 1 {
			t0 := time.Now()
			body, err := rawRequest(ctx, hc, http.MethodGet, endpoint+"/v1/graph"+q.query, token, nil)
			d := time.Since(t0)
			if err != nil {
				row.Errors++
				res.Notes = append(res.Notes, fmt.Sprintf("graph %s: %v", q.name, err))
				continue
			}
			if i == 0 {
				var g api.Graph
				if err := json.Unmarshal(body, &g); err == nil {
					row.Nodes, row.Edges = len(g.Nodes), len(g.Edges)
				}
				row.ResponseBytes = len(body)
				continue
			}
			samples = append(samples, d)
		}
		row.Latency = stats.Summarize(samples)
		r.log.Info("graph", "query", q.name, "objects", stored, "p50_ms", row.Latency.P50MS, "p99_ms", row.Latency.P99MS, "bytes", row.ResponseBytes)
		res.Graph = append(res.Graph, row)
	}
	measurePlan(stored, max(3, r.cfg.LayersGraphRounds))
	return nil
}

// quickstartPlan is the plan request of the quickstart (examples/quickstart): a profile, a definition,
// an instance placed in two regions and a gateway with a host, with placeholder ids.
func quickstartPlan() ([]byte, error) {
	profile := &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}, Nodes: 1}}
	def := layersDefinition()
	def.ID = "def"
	inst := &api.WorkloadInstance{Meta: api.Meta{ID: "inst", Name: layersApp},
		Spec: api.WorkloadInstanceSpec{DefinitionID: "def", Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}}}}
	gw := &api.Gateway{Meta: api.Meta{Name: layersApp}, Spec: api.GatewaySpec{InstanceID: "inst", Hosts: []string{layersHost}}}
	var req api.PlanRequest
	for _, f := range []func() (api.PlanChange, error){
		func() (api.PlanChange, error) {
			return api.ChangeOf(api.PlanCreate, api.KindRuntimeProfile, profile)
		},
		func() (api.PlanChange, error) {
			return api.ChangeOf(api.PlanCreate, api.KindWorkloadDefinition, def)
		},
		func() (api.PlanChange, error) {
			return api.ChangeOf(api.PlanCreate, api.KindWorkloadInstance, inst)
		},
		func() (api.PlanChange, error) { return api.ChangeOf(api.PlanCreate, api.KindGateway, gw) },
	} {
		ch, err := f()
		if err != nil {
			return nil, err
		}
		req.Changes = append(req.Changes, ch)
	}
	return json.Marshal(req)
}

// rawRequest sends one API request and returns the body of a 2xx answer.
func rawRequest(ctx context.Context, hc *http.Client, method, u, token string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(data))
	}
	return data, nil
}

// waitQuiet waits until this process (the in-process control plane) uses less than cores CPU over a
// second, at most limit.
func (r *Runner) waitQuiet(ctx context.Context, cores float64, limit time.Duration) {
	deadline := time.Now().Add(limit)
	prev, at := readProcStat().cpu, time.Now()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		cur, now := readProcStat().cpu, time.Now()
		if used := float64(cur-prev) / float64(now.Sub(at)); used < cores {
			return
		}
		prev, at = cur, now
	}
	r.log.Warn("the control plane was still busy when the wait ended", "limit", limit)
}
