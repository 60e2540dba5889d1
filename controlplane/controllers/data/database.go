// Package data reconciles databases: off AWS, an in-cluster StatefulSet with a Service, a volume and
// generated credentials, on every runtime the instance it serves runs on. The instance controller
// delivers the connection details to the instance's pods.
package data

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/workload"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// Names of what a database is made of, in its namespace.
const (
	// CredentialsSecret holds username, password and database.
	CredentialsSecret = client.DatabaseCredentialsSecret
	// ServiceName is the database's Service (and StatefulSet).
	ServiceName = "db"
	// LabelRetained marks a retained database's namespace and credentials with its name, so that a
	// database of that name created later takes them back.
	LabelRetained = "qleetos.io/retained-database"
)

// Namespace is where a database lives on each runtime.
func Namespace(db *client.Database) string { return client.DatabaseNamespace(db.Name) }

// DatabaseReconciler reconciles databases.
type DatabaseReconciler struct {
	// Client reads instances and runtimes (a controller token) and notifies instances.
	Client *client.Client
	// Connector connects to runtimes' clusters.
	Connector *kube.Connector

	once      sync.Once
	runtimes  reconcile.Deps[client.KubernetesRuntimeSpec, client.KubernetesRuntimeStatus]
	instances reconcile.Deps[client.WorkloadInstanceSpec, client.WorkloadInstanceStatus]
}

func (r *DatabaseReconciler) init() *DatabaseReconciler {
	r.once.Do(func() {
		r.runtimes.Resource = r.Client.KubernetesRuntimes()
		r.instances.Resource = r.Client.WorkloadInstances()
	})
	return r
}

// Reconcile runs the database on every runtime its instance runs on, and tells the instance once it is
// Ready there.
func (r *DatabaseReconciler) Reconcile(ctx context.Context, db *client.Database) (reconcile.Result, error) {
	inst, err := r.init().instances.Get(ctx, db.Spec.InstanceID)
	if client.IsNotFound(err) {
		return reconcile.Result{}, reconcile.Wait(fmt.Sprintf("workload_instance %q", db.Spec.InstanceID), "NotFound", "WorkloadInstanceNotFound", 5*time.Second)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get workload_instance: %w", err)
	}
	ids := runtimeIDs(inst)
	if len(ids) == 0 {
		return reconcile.Result{}, reconcile.Wait(fmt.Sprintf("workload_instance %q", inst.Name), "not placed on a runtime yet", "WorkloadInstanceNotPlaced", 2*time.Second)
	}
	wasReady := client.Reconciled(db.Generation, &db.Status.Status)
	var out []client.DatabaseRuntimeStatus
	var waitErr error
	for _, id := range ids {
		rs := client.DatabaseRuntimeStatus{RuntimeID: id, Phase: client.PhasePending}
		for _, prev := range db.Status.Runtimes {
			if prev.RuntimeID == id {
				rs.Objects = prev.Objects
			}
		}
		if err := r.run(ctx, db, &rs); err != nil {
			var we *reconcile.WaitError
			if !errors.As(err, &we) {
				db.Status.Runtimes = append(out, rs)
				return reconcile.Result{}, err
			}
			rs.Message = err.Error()
			waitErr = cmpErr(waitErr, err)
		}
		out = append(out, rs)
	}
	db.Status.Runtimes = out
	if waitErr != nil {
		return reconcile.Result{}, waitErr
	}
	for _, rs := range out {
		if rs.Phase != client.PhaseReady {
			db.Status.Message = fmt.Sprintf("on kubernetes_runtime %q: %s", rs.Runtime, rs.Message)
			return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
		}
	}
	if !wasReady {
		if err := r.Client.WorkloadInstances().RequestReconcile(ctx, inst.ID); err != nil && !client.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("notify workload_instance %q: %w", inst.Name, err)
		}
	}
	// The instance may move to other runtimes: look again now and then.
	return reconcile.Result{Recheck: 10 * time.Second}, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// runtimeIDs are the runtimes an instance runs on: its pinned one, or its placements.
func runtimeIDs(inst *client.WorkloadInstance) []string {
	if inst.Spec.RuntimeID != "" {
		return []string{inst.Spec.RuntimeID}
	}
	var ids []string
	for _, p := range inst.Status.Placements {
		if p.Phase != client.PhaseDeleting && p.RuntimeID != "" {
			ids = append(ids, p.RuntimeID)
		}
	}
	return ids
}

// run applies the database on one runtime and reports its health there.
func (r *DatabaseReconciler) run(ctx context.Context, db *client.Database, rs *client.DatabaseRuntimeStatus) error {
	rt, err := r.runtimes.RequireReady(ctx, rs.RuntimeID)
	if rt != nil {
		rs.Runtime = rt.Name
	}
	if err != nil {
		return err
	}
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		return err
	}
	ns := Namespace(db)
	adopt, err := retainedFor(ctx, cl, db)
	if err != nil {
		return err
	}
	objs, err := render(ctx, cl, db)
	if err != nil {
		return err
	}
	owner := kube.Owner{InstanceID: db.ID, Namespace: ns, Previous: workload.RefsOf(rs.Objects), Adopt: adopt}
	applied, err := kube.Apply(ctx, cl, owner, objs)
	if err != nil {
		if kube.IsInvalid(err) || kube.IsOwnershipConflict(err) {
			return reconcile.Terminal(fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err))
		}
		return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
	}
	rep := kube.HealthWith(ctx, cl, applied, kube.HealthOptions{})
	rs.Objects = rep.Objects
	eng := client.EngineOf(&db.Spec)
	rs.Namespace, rs.Host, rs.Port = ns, fmt.Sprintf("%s.%s.svc.cluster.local", ServiceName, ns), eng.Port
	if !rep.Ready {
		nr := rep.NotReady()
		rs.Phase, rs.Message = client.PhaseReconciling, fmt.Sprintf("%s %q is not ready: %s", nr.Kind, nr.Name, nr.Message)
		return nil
	}
	rs.Phase, rs.Message = client.PhaseReady, ""
	return nil
}

// retainedFor reports whether the runtime holds a retained database of this name (its namespace marked
// with the name), which this database takes back.
func retainedFor(ctx context.Context, cl *kube.Cluster, db *client.Database) (bool, error) {
	ns, err := cl.Clientset.CoreV1().Namespaces().Get(ctx, Namespace(db), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ns.Labels[LabelRetained] == db.Name, nil
}

// render makes the database's objects. The credentials are generated once: an existing credentials
// Secret (of this database, or retained by one of its name) keeps its password.
func render(ctx context.Context, cl *kube.Cluster, db *client.Database) ([]*unstructured.Unstructured, error) {
	ns := Namespace(db)
	eng := client.EngineOf(&db.Spec)
	password := ""
	sec, err := cl.Clientset.CoreV1().Secrets(ns).Get(ctx, CredentialsSecret, metav1.GetOptions{})
	switch {
	case err == nil:
		password = string(sec.Data["password"])
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	if password == "" {
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		password = base64.RawURLEncoding.EncodeToString(b)
	}
	user, name := "app", "app"
	secretRef := func(key string) map[string]any {
		return map[string]any{"secretKeyRef": map[string]any{"name": CredentialsSecret, "key": key}}
	}
	var env []any
	if db.Spec.Engine == client.EngineMySQL {
		env = []any{
			map[string]any{"name": "MYSQL_USER", "valueFrom": secretRef("username")},
			map[string]any{"name": "MYSQL_PASSWORD", "valueFrom": secretRef("password")},
			map[string]any{"name": "MYSQL_ROOT_PASSWORD", "valueFrom": secretRef("password")},
			map[string]any{"name": "MYSQL_DATABASE", "valueFrom": secretRef("database")},
		}
	} else {
		env = []any{
			map[string]any{"name": "POSTGRES_USER", "valueFrom": secretRef("username")},
			map[string]any{"name": "POSTGRES_PASSWORD", "valueFrom": secretRef("password")},
			map[string]any{"name": "POSTGRES_DB", "valueFrom": secretRef("database")},
		}
	}
	whenDeleted := "Delete"
	if db.Spec.Retain {
		whenDeleted = "Retain"
	}
	labels := map[string]any{"app.kubernetes.io/name": ServiceName}
	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}},
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": CredentialsSecret, "namespace": ns}, "type": "Opaque",
			"data": map[string]any{
				"username": b64(user), "password": b64(password), "database": b64(name),
			}},
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": ServiceName, "namespace": ns}, "spec": map[string]any{
			"selector": labels, "ports": []any{map[string]any{"name": eng.Scheme, "port": int64(eng.Port), "targetPort": int64(eng.Port)}}}},
		{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": ServiceName, "namespace": ns}, "spec": map[string]any{
			"serviceName": ServiceName, "replicas": int64(1),
			"selector":                             map[string]any{"matchLabels": labels},
			"persistentVolumeClaimRetentionPolicy": map[string]any{"whenDeleted": whenDeleted, "whenScaled": "Retain"},
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{"containers": []any{map[string]any{
				"name": "db", "image": eng.Image, "env": env,
				"ports":        []any{map[string]any{"containerPort": int64(eng.Port)}},
				"volumeMounts": []any{map[string]any{"name": "data", "mountPath": eng.DataDir}},
			}}}},
			"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "data"}, "spec": map[string]any{
				"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": db.Spec.Size}}}}},
		}},
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out, nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// Finalize removes the database from every runtime; with retain it removes the StatefulSet and the
// Service only, and marks the namespace and the credentials (the volume stays, with them) for a database
// of the same name to take back.
func (r *DatabaseReconciler) Finalize(ctx context.Context, db *client.Database) (reconcile.Result, error) {
	// The instance drops the connection details (it no longer lists a database being deleted).
	if err := r.Client.WorkloadInstances().RequestReconcile(ctx, db.Spec.InstanceID); err != nil && !client.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("notify workload_instance: %w", err)
	}
	if db.DeletionOrphan {
		return reconcile.Result{}, nil
	}
	for _, rs := range db.Status.Runtimes {
		rt, err := r.init().runtimes.Get(ctx, rs.RuntimeID)
		if client.IsNotFound(err) {
			continue
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		cl, err := r.Connector.Connect(ctx, rt)
		if err != nil {
			return reconcile.Result{}, err
		}
		owner := kube.Owner{InstanceID: db.ID, Namespace: Namespace(db), Previous: workload.RefsOf(rs.Objects)}
		if db.Spec.Retain {
			if err := retain(ctx, cl, db, owner); err != nil {
				return reconcile.Result{}, fmt.Errorf("retain on kubernetes_runtime %q: %w", rt.Name, err)
			}
			reconcile.Eventf(ctx, client.EventNormal, "Retained", "kept the volume and credentials in namespace %s on kubernetes_runtime %q", Namespace(db), rt.Name)
			continue
		}
		// The volumes first: a retained one taken back has no owner reference to the StatefulSet, and
		// the namespace goes only once it holds nothing but the database's own objects.
		left, err := deleteVolumes(ctx, cl, Namespace(db))
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("delete volumes on kubernetes_runtime %q: %w", rt.Name, err)
		}
		if left > 0 {
			if _, err := kube.Prune(ctx, cl, owner, []kube.AppliedRef{{APIVersion: "v1", Kind: "Namespace", Name: Namespace(db)}}); err != nil {
				return reconcile.Result{}, err
			}
			db.Status.Message = fmt.Sprintf("%d volume(s) still going away on kubernetes_runtime %q", left, rt.Name)
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		err = kube.DeleteAll(ctx, cl, owner)
		if errors.Is(err, kube.ErrStillPresent) {
			db.Status.Message = err.Error()
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("delete on kubernetes_runtime %q: %w", rt.Name, err)
		}
	}
	return reconcile.Result{}, nil
}

// deleteVolumes deletes the StatefulSet's volume claims in the database's namespace and returns how many
// are still there.
func deleteVolumes(ctx context.Context, cl *kube.Cluster, ns string) (int, error) {
	pvcs, err := cl.Clientset.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	left := 0
	for _, p := range pvcs.Items {
		if !strings.HasPrefix(p.Name, "data-"+ServiceName+"-") {
			continue // not the database's
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

// retain deletes what runs the database and marks what keeps its data.
func retain(ctx context.Context, cl *kube.Cluster, db *client.Database, owner kube.Owner) error {
	keep := []kube.AppliedRef{
		{APIVersion: "v1", Kind: "Namespace", Name: Namespace(db)},
		{APIVersion: "v1", Kind: "Secret", Namespace: Namespace(db), Name: CredentialsSecret},
	}
	if _, err := kube.Prune(ctx, cl, owner, keep); err != nil {
		return err
	}
	// Released from this database's ownership, marked for one of its name.
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null,%q:null,%q:%q}}}`,
		kube.LabelInstanceID, kube.LabelManagedBy, LabelRetained, db.Name))
	if _, err := cl.Clientset.CoreV1().Namespaces().Patch(ctx, Namespace(db), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, err := cl.Clientset.CoreV1().Secrets(Namespace(db)).Patch(ctx, CredentialsSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
