// Package dataservice reconciles databases and buckets: off AWS, an in-cluster StatefulSet (PostgreSQL, MySQL,
// or an S3-compatible store) with a Service, a volume and generated credentials, on every runtime the
// instance it serves runs on. The instance controller delivers the connection details to the pods.
package dataservice

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// Names of what a data service is made of, in its namespace.
const (
	// CredentialsSecret holds the generated credentials.
	CredentialsSecret = render.DatabaseCredentialsSecret
	// ServiceName is the data service's Service (and StatefulSet).
	ServiceName = "db"
	// LabelRetained marks a retained data service's namespace and credentials with its name, so that one
	// of that kind (the namespace says which) and name created later takes them back. A runtime that
	// holds such a namespace is in use: it is not reclaimed (see the runtime controller).
	LabelRetained = api.LabelRetained
)

// Service is how one data service object runs in a cluster.
type Service struct {
	// InstanceID is the instance it serves.
	InstanceID string
	// Namespace holds it.
	Namespace string
	// Image, Port and DataDir describe the container.
	Image   string
	Port    int32
	DataDir string
	// Args are the container's arguments.
	Args []any
	// Credentials are the keys of the generated credentials, with fixed values where not empty.
	Credentials map[string]string
	// Env makes the container's environment from the credentials Secret's keys.
	Env map[string]string
	// Size is the volume size.
	Size string
	// Retain keeps the volume and the credentials on delete.
	Retain bool
	// Kind is the object's kind (database or bucket); on an eks runtime it says what serves it (RDS or S3).
	Kind string
	// HomeRuntimeID and HomeRegion are the spec's home, if it names one.
	HomeRuntimeID, HomeRegion string
	// Engine and Version are a database's, for RDS.
	Engine, Version string
	// Replicas is a database's read replicas per region where a consumer runs.
	Replicas int
	// Streaming says that replicas run somewhere: the home lets them stream from it.
	Streaming bool
}

// Kind describes a data service kind to the Reconciler.
type Kind[S any, T any] struct {
	// Describe says how an object runs.
	Describe func(obj *api.Object[S, T]) Service
	// Runtimes points at the status's per-runtime list.
	Runtimes func(st *T) *[]api.DataRuntimeStatus
	// Home points at the status's home.
	Home func(st *T) **api.DataHome
}

// Databases runs databases: PostgreSQL or MySQL.
var Databases = Kind[api.DatabaseSpec, api.DatabaseStatus]{
	Describe: func(db *api.Database) Service {
		eng := render.EngineOf(&db.Spec)
		env := map[string]string{"POSTGRES_USER": "username", "POSTGRES_PASSWORD": "password", "POSTGRES_DB": "database"}
		if db.Spec.Engine == api.EngineMySQL {
			env = map[string]string{"MYSQL_USER": "username", "MYSQL_PASSWORD": "password", "MYSQL_ROOT_PASSWORD": "password", "MYSQL_DATABASE": "database"}
		}
		return Service{InstanceID: db.Spec.InstanceID, Namespace: render.DatabaseNamespace(db.Name), Image: eng.Image, Port: eng.Port, DataDir: eng.DataDir,
			Credentials: map[string]string{"username": "app", "password": "", "database": "app"}, Env: env, Size: db.Spec.Size, Retain: db.Spec.Retain,
			Kind: api.KindDatabase, Engine: db.Spec.Engine, Version: db.Spec.Version, HomeRuntimeID: db.Spec.RuntimeID, HomeRegion: db.Spec.Region,
			Replicas: db.Spec.ReplicasPerRegion}
	},
	Runtimes: func(st *api.DatabaseStatus) *[]api.DataRuntimeStatus { return &st.Runtimes },
	Home:     func(st *api.DatabaseStatus) **api.DataHome { return &st.Home },
}

// Buckets runs S3-compatible object stores (MinIO).
var Buckets = Kind[api.BucketSpec, api.BucketStatus]{
	Describe: func(b *api.Bucket) Service {
		return Service{InstanceID: b.Spec.InstanceID, Namespace: render.BucketNamespace(b.Name), Image: render.BucketImage, Port: render.BucketPort, DataDir: "/data",
			Args:        []any{"server", "/data"},
			Credentials: map[string]string{"access_key": "", "secret_key": ""},
			Env:         map[string]string{"MINIO_ROOT_USER": "access_key", "MINIO_ROOT_PASSWORD": "secret_key"}, Size: b.Spec.Size, Retain: b.Spec.Retain,
			Kind: api.KindBucket, HomeRuntimeID: b.Spec.RuntimeID, HomeRegion: b.Spec.Region}
	},
	Runtimes: func(st *api.BucketStatus) *[]api.DataRuntimeStatus { return &st.Runtimes },
	Home:     func(st *api.BucketStatus) **api.DataHome { return &st.Home },
}

// Reconciler reconciles one data service kind.
type Reconciler[S any, T any] struct {
	// Client reads instances and runtimes (a controller token) and notifies instances.
	Client *client.Client
	// Connector connects to runtimes' clusters.
	Connector *kube.Connector
	// Kind is the kind served.
	Kind Kind[S, T]
	// AWS serves the kind with AWS (RDS, S3) on eks runtimes; nil leaves eks runtimes in-cluster too.
	AWS *AWS
}

// lookups are the reads of other objects that the runtime hands the reconcile (reconcile.LookupsFrom).
func (r *Reconciler[S, T]) lookups(ctx context.Context) *reconcile.Lookups {
	return reconcile.LookupsFrom(ctx, r.Client)
}

// Reconcile runs the data service at its home, gives every other runtime its consumers run on access to
// it (an alias Service and a copy of the credentials), and tells the consumers when it becomes Ready
// somewhere. With no consumer placed yet it is Ready, with nothing to run.
func (r *Reconciler[S, T]) Reconcile(ctx context.Context, obj *api.Object[S, T]) (reconcile.Result, error) {
	svc := r.Kind.Describe(obj)
	st := client.CommonStatus(obj)
	runtimes := r.Kind.Runtimes(&obj.Status)
	homeOf := r.Kind.Home(&obj.Status)
	insts, err := r.consumers(ctx, obj.ID, svc.InstanceID)
	if err != nil {
		return reconcile.Result{}, err
	}
	sortConsumers(insts, svc.InstanceID)
	home, err := r.chooseHome(ctx, svc, *homeOf, *runtimes, insts)
	if err != nil {
		return reconcile.Result{}, err
	}
	if home == nil {
		// A consumer placed on a runtime asks it to look (the instance's dataOn and notifyDataServices).
		st.Message = "no consumer is placed yet: it will live where its first consumer runs"
		return reconcile.Result{}, nil
	}
	if *homeOf == nil || (*homeOf).RuntimeID != home.RuntimeID {
		reconcile.Eventf(ctx, api.EventNormal, ReasonHomeChosen, "its home is kubernetes_runtime %q in %q (%s)", home.Runtime, home.Region, home.Reason)
	}
	*homeOf = home
	readyBefore := readyRuntimes(*runtimes)
	plan := sites(home, insts, *runtimes)
	if err := r.placeReplicas(ctx, plan, insts, svc.Replicas); err != nil {
		return reconcile.Result{}, err
	}
	svc.Streaming = slices.ContainsFunc(plan, func(s site) bool { return s.replicas > 0 })
	out := make([]api.DataRuntimeStatus, len(plan))
	for i, s := range plan {
		out[i] = api.DataRuntimeStatus{RuntimeID: s.runtimeID, Role: s.role, Copy: s.copy, Phase: api.PhasePending, Replicas: s.replicas}
		for _, prev := range *runtimes {
			if prev.RuntimeID == s.runtimeID {
				out[i].Objects = prev.Objects
				out[i].Runtime = prev.Runtime
				out[i].ReplicaCloudIDs = prev.ReplicaCloudIDs
			}
		}
	}
	homeRS := &out[0]
	var waitErr error
	failed := func(rs *api.DataRuntimeStatus, err error) error {
		var we *reconcile.WaitError
		if !errors.As(err, &we) {
			*runtimes = out
			return err
		}
		rs.Message = err.Error()
		waitErr = cmp.Or(waitErr, err)
		return nil
	}
	exposed := len(plan) > 1 && slices.ContainsFunc(plan[1:], func(s site) bool { return s.role == api.DataRoleAccess })
	creds, address, err := r.runHome(ctx, obj.ID, obj.Name, svc, exposed, namespacesOn(insts, home.RuntimeID), homeRS)
	if err != nil {
		if err := failed(homeRS, err); err != nil {
			return reconcile.Result{}, err
		}
	}
	home.Address = address
	for i := 1; i < len(out); i++ {
		rs := &out[i]
		switch {
		case rs.Role != api.DataRoleAccess:
			// Only an old copy of the data: kept as it is, given to no consumer.
			rs.Phase, rs.Message = api.PhaseReady, "a separate copy of the data from before it had one home: kept, unused, until it is deleted"
		case homeRS.Phase != api.PhaseReady || address == "":
			rs.Message = fmt.Sprintf("waiting for its home on kubernetes_runtime %q", home.Runtime)
			if homeRS.Phase == api.PhaseReady {
				rs.Message = fmt.Sprintf("waiting for the address of its home on kubernetes_runtime %q (Service %s)", home.Runtime, render.ExposeService)
			}
		default:
			if err := r.access(ctx, obj.ID, obj.Name, svc, homeRS, address, creds, namespacesOn(insts, rs.RuntimeID), rs); err != nil {
				if err := failed(rs, err); err != nil {
					return reconcile.Result{}, err
				}
			}
		}
	}
	// A runtime no consumer runs on any more loses its access to the home (it holds no data).
	for _, prev := range *runtimes {
		if prev.Role != api.DataRoleAccess || prev.Copy || slices.ContainsFunc(plan, func(s site) bool { return s.runtimeID == prev.RuntimeID }) {
			continue
		}
		if err := r.dropAccess(ctx, obj.ID, obj.Name, svc, prev); err != nil {
			prev.Message = fmt.Sprintf("removing its access: %v", err)
			out = append(out, prev)
			waitErr = cmp.Or(waitErr, reconcile.Wait(fmt.Sprintf("kubernetes_runtime %q", prev.Runtime), "removing its access: "+err.Error(), "AccessCleanup", 5*time.Second))
		}
	}
	*runtimes = out
	if waitErr != nil {
		return reconcile.Result{}, waitErr
	}
	for _, rs := range out {
		if rs.Phase != api.PhaseReady {
			st.Message = fmt.Sprintf("on kubernetes_runtime %q (%s): %s", rs.Runtime, rs.Role, rs.Message)
			return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
		}
	}
	if readyRuntimes(out) != readyBefore {
		for _, inst := range insts {
			if err := r.Client.WorkloadInstances().RequestReconcile(ctx, inst.ID); err != nil && !api.IsNotFound(err) {
				return reconcile.Result{}, fmt.Errorf("notify workload_instance %q: %w", inst.Name, err)
			}
		}
	}
	// Nothing to look at again on a timer: a consumer that comes to or leaves a runtime notifies it
	// (the instance's notifyDataServices), so does one that stops listing it (the store notifies what a
	// spec no longer references) or goes, and the clusters' watches report its objects' drift and health
	// (kube.Owner.Kind routes them here).
	return reconcile.Result{}, nil
}

// runHome runs the data service at its home and returns its credentials and, when exposed, the
// address the other runtimes reach it at.
func (r *Reconciler[S, T]) runHome(ctx context.Context, id, name string, svc Service, exposed bool, consumers []string, rs *api.DataRuntimeStatus) (map[string][]byte, string, error) {
	rt, cl, err := r.run(ctx, id, name, svc, exposed, consumers, rs)
	if err != nil || rs.Phase != api.PhaseReady {
		return nil, "", err
	}
	creds, err := cl.Clientset.CoreV1().Secrets(svc.Namespace).Get(ctx, CredentialsSecret, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("read the credentials on kubernetes_runtime %q: %w", rt.Name, err)
	}
	if !exposed {
		return creds.Data, "", nil
	}
	if rs.CloudID != "" {
		return creds.Data, cmp.Or(rs.Host, rs.Endpoint), nil
	}
	address, err := exposedAddress(ctx, cl, svc.Namespace)
	if err != nil {
		return nil, "", fmt.Errorf("read the address of Service %s on kubernetes_runtime %q: %w", render.ExposeService, rt.Name, err)
	}
	return creds.Data, address, nil
}

// consumers are the instances a data service serves: the one it names, and those that list it.
func (r *Reconciler[S, T]) consumers(ctx context.Context, id, named string) ([]*api.WorkloadInstance, error) {
	var out []*api.WorkloadInstance
	if named != "" {
		inst, err := r.lookups(ctx).Instances.Get(ctx, named)
		switch {
		case api.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get workload_instance: %w", err)
		default:
			out = append(out, inst)
		}
	}
	for inst, err := range r.Client.WorkloadInstances().All(ctx, client.ListOptions{References: id}) {
		if err != nil {
			return nil, fmt.Errorf("list the instances that use it: %w", err)
		}
		if !slices.ContainsFunc(out, func(o *api.WorkloadInstance) bool { return o.ID == inst.ID }) {
			out = append(out, inst)
		}
	}
	return out, nil
}

// readyRuntimes names the runtimes where the data service is Ready.
func readyRuntimes(rts []api.DataRuntimeStatus) string {
	var ids []string
	for _, rs := range rts {
		if rs.Phase == api.PhaseReady {
			ids = append(ids, rs.RuntimeID)
		}
	}
	return strings.Join(ids, ",")
}

// runtimeIDs are the runtimes an instance runs on: its pinned one, or its placements.
func runtimeIDs(inst *api.WorkloadInstance) []string {
	if inst.Spec.RuntimeID != "" {
		return []string{inst.Spec.RuntimeID}
	}
	var ids []string
	for _, p := range inst.Status.Placements {
		if p.Phase != api.PhaseDeleting && p.RuntimeID != "" {
			ids = append(ids, p.RuntimeID)
		}
	}
	return ids
}

// namespacesOn are the namespaces of the instances that run on the runtime.
func namespacesOn(insts []*api.WorkloadInstance, runtimeID string) []string {
	var out []string
	for _, inst := range insts {
		if ns := render.Namespace(inst); slices.Contains(runtimeIDs(inst), runtimeID) && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// run applies the data service at its home and reports its health there; exposed also gives it a
// LoadBalancer Service that the other runtimes reach it by. consumers are the namespaces of the
// instances using it there.
func (r *Reconciler[S, T]) run(ctx context.Context, id, name string, svc Service, exposed bool, consumers []string, rs *api.DataRuntimeStatus) (*api.KubernetesRuntime, *kube.Cluster, error) {
	rt, err := r.lookups(ctx).Runtimes.RequireReady(ctx, rs.RuntimeID)
	if rt != nil {
		rs.Runtime = rt.Name
	}
	if err != nil {
		return rt, nil, err
	}
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		return rt, nil, err
	}
	if rt.Spec.Provider == api.ProviderEKS && r.AWS != nil {
		return rt, cl, r.AWS.run(ctx, cl, id, name, svc, rt, consumers, rs)
	}
	return rt, cl, r.runInCluster(ctx, cl, rt, id, name, svc, exposed, rs)
}

// runInCluster runs the data service as a StatefulSet in the runtime's cluster.
func (r *Reconciler[S, T]) runInCluster(ctx context.Context, cl *kube.Cluster, rt *api.KubernetesRuntime, id, name string, svc Service, exposed bool, rs *api.DataRuntimeStatus) error {
	ns := svc.Namespace
	adopt, err := retainedFor(ctx, cl, ns, r.retainedMark(name))
	if err != nil {
		return err
	}
	if err := ownNamespace(ctx, cl, ns, id, adopt); err != nil {
		return reconcile.Terminal(fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err))
	}
	objs, err := renderService(ctx, cl, svc, exposed, rs.Replicas)
	if err != nil {
		return err
	}
	owner := kube.Owner{InstanceID: id, Kind: svc.Kind, Namespace: ns, Previous: kube.RefsOf(rs.Objects), Adopt: adopt}
	applied, err := kube.Apply(ctx, cl, owner, objs)
	if err != nil {
		if kube.IsInvalid(err) || kube.IsOwnershipConflict(err) {
			return reconcile.Terminal(fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err))
		}
		return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
	}
	if err := pruneDropped(ctx, cl, owner, applied); err != nil {
		return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
	}
	rep := kube.HealthWith(ctx, cl, applied, kube.HealthOptions{})
	rs.Objects = rep.Objects
	rs.Namespace, rs.Host, rs.Port = ns, fmt.Sprintf("%s.%s.svc.cluster.local", ServiceName, ns), svc.Port
	rs.ReadHost = ""
	if rs.Replicas > 0 {
		rs.ReadHost = readHost(ns)
	}
	if !rep.Ready {
		nr := rep.NotReady()
		rs.Phase, rs.Message = api.PhaseReconciling, fmt.Sprintf("%s %q is not ready: %s", nr.Kind, nr.Name, nr.Message)
		return nil
	}
	rs.Phase, rs.Message = api.PhaseReady, ""
	return nil
}

// ownNamespace refuses a namespace that exists without being this data service's (or retained for it):
// its volumes and credentials live there, and QleetOS takes over and deletes nothing it did not create.
func ownNamespace(ctx context.Context, cl *kube.Cluster, namespace, id string, retained bool) error {
	ns, err := cl.Clientset.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || retained {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.Labels[kube.LabelInstanceID] != id {
		return fmt.Errorf("namespace %s already exists and was not created by QleetOS for it; it was left unchanged (delete or rename it, or give the %s another name)", namespace, "data service")
	}
	return nil
}

// retainedMark is the value of LabelRetained for an object of this name (the namespace says the kind).
func (r *Reconciler[S, T]) retainedMark(name string) string { return name }

// retainedFor reports whether the runtime holds a retained data service of this kind and name (its
// namespace marked), which this one takes back.
func retainedFor(ctx context.Context, cl *kube.Cluster, namespace, mark string) (bool, error) {
	ns, err := cl.Clientset.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ns.Labels[LabelRetained] == mark, nil
}

// renderService makes a data service's objects, with replicas read replicas beside it. The credentials are
// generated once: an existing credentials Secret (of this object, or retained by one of its kind and
// name) keeps its values.
func renderService(ctx context.Context, cl *kube.Cluster, svc Service, exposed bool, replicas int) ([]*unstructured.Unstructured, error) {
	ns := svc.Namespace
	creds, err := keptCredentials(ctx, cl, svc)
	if err != nil {
		return nil, err
	}
	data := map[string]any{}
	for k, v := range creds {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	var env []any
	for _, name := range slices.Sorted(maps.Keys(svc.Env)) {
		env = append(env, map[string]any{"name": name, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": CredentialsSecret, "key": svc.Env[name]}}})
	}
	whenDeleted := "Delete"
	if svc.Retain {
		whenDeleted = "Retain"
	}
	labels := map[string]any{"app.kubernetes.io/name": ServiceName}
	container := map[string]any{
		"name": "main", "image": svc.Image, "env": env,
		"ports":        []any{map[string]any{"containerPort": int64(svc.Port)}},
		"volumeMounts": []any{map[string]any{"name": "data", "mountPath": svc.DataDir}},
	}
	if len(svc.Args) > 0 {
		container["args"] = svc.Args
	}
	pod := map[string]any{"containers": []any{container}}
	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}},
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": CredentialsSecret, "namespace": ns}, "type": "Opaque", "data": data},
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": ServiceName, "namespace": ns}, "spec": map[string]any{
			"selector": labels, "ports": []any{map[string]any{"name": "main", "port": int64(svc.Port), "targetPort": int64(svc.Port)}}}},
		{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": ServiceName, "namespace": ns}, "spec": map[string]any{
			"serviceName": ServiceName, "replicas": int64(1),
			"selector":                             map[string]any{"matchLabels": labels},
			"persistentVolumeClaimRetentionPolicy": map[string]any{"whenDeleted": whenDeleted, "whenScaled": "Retain"},
			"template":                             map[string]any{"metadata": map[string]any{"labels": labels}, "spec": pod},
			"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "data"}, "spec": map[string]any{
				"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": svc.Size}}}}},
		}},
	}
	if exposed {
		objs = append(objs, map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": render.ExposeService, "namespace": ns}, "spec": map[string]any{
			"type": "LoadBalancer", "selector": labels, "ports": []any{map[string]any{"name": "main", "port": int64(svc.Port), "targetPort": int64(svc.Port)}}}})
	}
	if svc.Streaming {
		objs = streamingHome(svc, objs, container, pod)
	}
	if replicas > 0 {
		objs = append(objs, replicaObjects(svc, fmt.Sprintf("%s.%s.svc.cluster.local", ServiceName, ns), CredentialsSecret, replicas)...)
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out, nil
}

// Finalize removes the data service from every runtime; with retain it removes the StatefulSet and the
// Service only, and marks the namespace and the credentials (the volume stays, with them) for one of the
// same kind and name to take back.
func (r *Reconciler[S, T]) Finalize(ctx context.Context, obj *api.Object[S, T]) (reconcile.Result, error) {
	svc := r.Kind.Describe(obj)
	// The instance drops the connection details (it no longer lists a data service being deleted).
	if svc.InstanceID != "" {
		if err := r.Client.WorkloadInstances().RequestReconcile(ctx, svc.InstanceID); err != nil && !api.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("notify workload_instance: %w", err)
		}
	}
	if obj.DeletionOrphan {
		return reconcile.Result{}, nil
	}
	// Read replicas first, retain or not: they hold no data of their own, and stream from the home.
	if gone, err := r.removeReplicas(ctx, obj, svc); err != nil || !gone {
		return reconcile.Result{RequeueAfter: time.Second}, err
	}
	for _, rs := range *r.Kind.Runtimes(&obj.Status) {
		rt, err := r.lookups(ctx).Runtimes.Get(ctx, rs.RuntimeID)
		if api.IsNotFound(err) {
			continue // the runtime and everything on it are gone
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		cl, err := r.Connector.Connect(ctx, rt)
		if err != nil {
			return reconcile.Result{}, err
		}
		// A runtime that only reaches the home holds no data: what QleetOS put there goes, retain or not
		// (on AWS, the network its read replicas had).
		accessOnly := rs.Role == api.DataRoleAccess && !rs.Copy
		if rt.Spec.Provider == api.ProviderEKS && r.AWS != nil && (!svc.Retain || accessOnly) {
			if after, err := r.AWS.remove(ctx, cl, obj.ID, obj.Name, svc, rt, &rs); err != nil || after > 0 {
				client.CommonStatus(obj).Message = rs.Message
				return reconcile.Result{RequeueAfter: after}, err
			}
		}
		if len(rs.Objects) == 0 {
			continue // nothing was applied there
		}
		if err := ownNamespace(ctx, cl, svc.Namespace, obj.ID, false); err != nil {
			reconcile.Eventf(ctx, api.EventWarning, "LeftAlone", "on kubernetes_runtime %q: %v", rt.Name, err)
			continue // not ours: nothing there is deleted
		}
		owner := kube.Owner{InstanceID: obj.ID, Namespace: svc.Namespace, Previous: kube.RefsOf(rs.Objects)}
		if svc.Retain && !accessOnly {
			if err := retain(ctx, cl, svc.Namespace, r.retainedMark(obj.Name), owner); err != nil {
				return reconcile.Result{}, fmt.Errorf("retain on kubernetes_runtime %q: %w", rt.Name, err)
			}
			reconcile.Eventf(ctx, api.EventNormal, "Retained", "kept the volume and credentials in namespace %s on kubernetes_runtime %q", svc.Namespace, rt.Name)
			continue
		}
		// The volumes first: a retained one taken back has no owner reference to the StatefulSet, and
		// the namespace goes only once it holds nothing but the data service's own objects.
		left, err := deleteVolumes(ctx, cl, svc.Namespace)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("delete volumes on kubernetes_runtime %q: %w", rt.Name, err)
		}
		if left > 0 {
			if _, err := kube.Prune(ctx, cl, owner, []kube.AppliedRef{{APIVersion: "v1", Kind: "Namespace", Name: svc.Namespace}}); err != nil {
				return reconcile.Result{}, err
			}
			client.CommonStatus(obj).Message = fmt.Sprintf("%d volume(s) still going away on kubernetes_runtime %q", left, rt.Name)
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		err = kube.DeleteAll(ctx, cl, owner)
		if errors.Is(err, kube.ErrStillPresent) {
			client.CommonStatus(obj).Message = err.Error()
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("delete on kubernetes_runtime %q: %w", rt.Name, err)
		}
	}
	return reconcile.Result{}, nil
}

// dropAccess deletes what gave a runtime access to the home (the alias Service and the credentials'
// copy) once no consumer runs there. A runtime that is gone took them with it.
func (r *Reconciler[S, T]) dropAccess(ctx context.Context, id, name string, svc Service, rs api.DataRuntimeStatus) error {
	rt, err := r.lookups(ctx).Runtimes.Get(ctx, rs.RuntimeID)
	if api.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.AWS != nil && rt.Spec.Provider == api.ProviderEKS {
		gone, err := r.AWS.removeReplicas(ctx, rt, id, svc, &rs)
		if err != nil {
			return err
		}
		if !gone {
			return errors.New(rs.Message)
		}
	}
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		return err
	}
	if r.AWS != nil && rt.Spec.Provider == api.ProviderEKS {
		// What the runtime's access had in AWS: a bucket's role for its consumers, the network of a
		// database's replicas.
		if after, err := r.AWS.remove(ctx, cl, id, name, svc, rt, &rs); err != nil || after > 0 {
			return cmp.Or(err, errors.New(rs.Message))
		}
	}
	err = kube.DeleteAll(ctx, cl, kube.Owner{InstanceID: id, Namespace: svc.Namespace, Previous: kube.RefsOf(rs.Objects)})
	if err == nil {
		reconcile.Eventf(ctx, api.EventNormal, "AccessRemoved", "no consumer runs on kubernetes_runtime %q any more: removed its access to the home", rt.Name)
	}
	return err
}

// deleteVolumes deletes the StatefulSet's volume claims in the namespace and returns how many are still
// there.
func deleteVolumes(ctx context.Context, cl *kube.Cluster, ns string) (int, error) {
	pvcs, err := cl.Clientset.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	left := 0
	for _, p := range pvcs.Items {
		if !strings.HasPrefix(p.Name, "data-"+ServiceName+"-") {
			continue // not the data service's
		}
		left++
		if p.DeletionTimestamp == nil {
			if err := cl.Clientset.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return 0, err
			}
		}
	}
	return left, nil
}

// retain deletes what runs the data service and marks what keeps its data.
func retain(ctx context.Context, cl *kube.Cluster, ns, mark string, owner kube.Owner) error {
	keep := []kube.AppliedRef{
		{APIVersion: "v1", Kind: "Namespace", Name: ns},
		{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: CredentialsSecret},
	}
	if _, err := kube.Prune(ctx, cl, owner, keep); err != nil {
		return err
	}
	// Released from this object's ownership, marked for one of its kind and name.
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null,%q:null,%q:%q}}}`,
		kube.LabelInstanceID, kube.LabelManagedBy, LabelRetained, mark))
	if _, err := cl.Clientset.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, err := cl.Clientset.CoreV1().Secrets(ns).Patch(ctx, CredentialsSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
