package workload

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// AnnotationDependencies holds a hash of what an instance's pods get from its dependencies (secret values,
// the addresses of the instances it uses): when it changes, the pods roll.
const AnnotationDependencies = "qleetos.io/dependencies"

// dependencies are what an instance consumes beyond its definition: the secrets that serve it and the
// instances it uses, resolved for one reconcile.
type dependencies struct {
	secrets   []*client.Secret
	databases []*client.Database
	env       []map[string]any // plain variables for the instances it uses
	used      []*client.WorkloadInstance
	hash      string
}

// dependencies resolves the instance's dependencies, or says which one it waits on (a WaitError naming
// it) or which Failed (a Terminal error with its reason). It records the secrets in the instance's
// status; the secret controller wakes the instances a secret serves when it changes.
func (r *InstanceReconciler) dependencies(ctx context.Context, inst *client.WorkloadInstance) (*dependencies, error) {
	d := &dependencies{}
	h := sha256.New()
	var refs []client.ObjectRef
	for s, err := range r.Client.Secrets().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		if s.DeletionRequestedAt != nil || !slices.Contains(s.Spec.InstanceIDs, inst.ID) {
			continue
		}
		refs = append(refs, client.ObjectRef{Kind: client.KindSecret, ID: s.ID, Name: s.Name})
		d.secrets = append(d.secrets, s)
	}
	for db, err := range r.Client.Databases().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list databases: %w", err)
		}
		if db.DeletionRequestedAt == nil && db.Spec.InstanceID == inst.ID {
			refs = append(refs, client.ObjectRef{Kind: client.KindDatabase, ID: db.ID, Name: db.Name})
			d.databases = append(d.databases, db)
		}
	}
	inst.Status.Dependencies = refs
	sort.Slice(d.secrets, func(i, j int) bool { return d.secrets[i].Name < d.secrets[j].Name })
	for _, s := range d.secrets {
		if !client.Reconciled(s.Generation, &s.Status.Status) {
			return nil, reconcile.Wait(fmt.Sprintf("secret %q", s.Name), string(s.Status.Phase), "SecretNotReady", 5*time.Second)
		}
		fmt.Fprintf(h, "secret %s %s\n", s.Name, s.Spec.MountPath)
		for _, k := range sortedKeys(s.Spec.Values) {
			fmt.Fprintf(h, "%s=%s\n", k, s.Spec.Values[k])
		}
	}
	for _, u := range inst.Spec.Uses {
		used, err := r.deps().instances.RequireReady(ctx, u.InstanceID)
		if err != nil {
			return nil, err
		}
		port, err := r.servicePort(ctx, used)
		if err != nil {
			return nil, err
		}
		host := fmt.Sprintf("%s.%s.svc.cluster.local", used.Name, used.Status.Namespace)
		for _, kv := range [][2]string{
			{u.EnvPrefix + "_HOST", host},
			{u.EnvPrefix + "_PORT", strconv.Itoa(int(port))},
			{u.EnvPrefix + "_URL", fmt.Sprintf("http://%s:%d", host, port)},
		} {
			d.env = append(d.env, map[string]any{"name": kv[0], "value": kv[1]})
			fmt.Fprintf(h, "%s=%s\n", kv[0], kv[1])
		}
		d.used = append(d.used, used)
	}
	if len(d.secrets) > 0 || len(d.env) > 0 {
		d.hash = hex.EncodeToString(h.Sum(nil))[:16]
	}
	return d, nil
}

// onRuntime is what the instance's pods get on one runtime beyond the instance-wide dependencies: the
// connection details of its databases there.
type onRuntime struct {
	objs []*unstructured.Unstructured
	env  []any
	hash string
}

// databasesOn waits until every database of the instance is Ready on the runtime, and returns a Secret in
// the instance's namespace with each one's connection details (<PREFIX>_URL, _HOST, _PORT, _NAME, _USER,
// _PASSWORD), read from the database's credentials there, with the variables that reference it.
func (r *InstanceReconciler) databasesOn(ctx context.Context, cl *kube.Cluster, d *dependencies, rt *client.KubernetesRuntime, ns string) (onRuntime, error) {
	var out onRuntime
	h := sha256.New()
	for _, db := range d.databases {
		var at *client.DatabaseRuntimeStatus
		for i := range db.Status.Runtimes {
			if db.Status.Runtimes[i].RuntimeID == rt.ID && db.Status.Runtimes[i].Phase == client.PhaseReady {
				at = &db.Status.Runtimes[i]
			}
		}
		if at == nil || db.Status.ObservedGeneration != db.Generation {
			state := string(db.Status.Phase)
			if db.Status.Message != "" {
				state += ": " + db.Status.Message
			}
			if db.Status.Phase == client.PhaseFailed && db.Status.ObservedGeneration == db.Generation {
				return out, reconcile.Terminal(fmt.Errorf("database %q failed: %s", db.Name, db.Status.Message))
			}
			return out, reconcile.Wait(fmt.Sprintf("database %q", db.Name), cmp.Or(state, "Pending")+" on kubernetes_runtime "+strconv.Quote(rt.Name), "DatabaseNotReady", 5*time.Second)
		}
		creds, err := cl.Clientset.CoreV1().Secrets(at.Namespace).Get(ctx, client.DatabaseCredentialsSecret, metav1.GetOptions{})
		if err != nil {
			return out, fmt.Errorf("read the credentials of database %q: %w", db.Name, err)
		}
		user, pass, name := string(creds.Data["username"]), string(creds.Data["password"]), string(creds.Data["database"])
		eng := client.EngineOf(&db.Spec)
		p := db.Spec.EnvPrefix
		values := map[string]string{
			p + "_URL": client.DatabaseURL(eng.Scheme, user, pass, at.Host, at.Port, name), p + "_HOST": at.Host,
			p + "_PORT": strconv.Itoa(int(at.Port)), p + "_NAME": name, p + "_USER": user, p + "_PASSWORD": pass,
		}
		secretName := "qleet-db-" + db.Name
		data := map[string]any{}
		for _, k := range sortedKeys(values) {
			data[k] = base64.StdEncoding.EncodeToString([]byte(values[k]))
			out.env = append(out.env, map[string]any{"name": k, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": secretName, "key": k}}})
			fmt.Fprintf(h, "%s=%s\n", k, values[k])
		}
		sec := &unstructured.Unstructured{Object: map[string]any{"type": "Opaque", "data": data}}
		sec.SetAPIVersion("v1")
		sec.SetKind("Secret")
		sec.SetName(secretName)
		sec.SetNamespace(ns)
		out.objs = append(out.objs, sec)
	}
	if len(d.databases) > 0 {
		out.hash = hex.EncodeToString(h.Sum(nil))[:16]
	}
	return out, nil
}

// servicePort is the port of a used instance's Service: its definition's first container port.
func (r *InstanceReconciler) servicePort(ctx context.Context, used *client.WorkloadInstance) (int32, error) {
	def, err := r.deps().definitions.Get(ctx, used.Spec.DefinitionID)
	if err != nil {
		return 0, fmt.Errorf("get workload_definition of used workload_instance %q: %w", used.Name, err)
	}
	for _, c := range def.Spec.Containers {
		for _, p := range c.Ports {
			return p.ContainerPort, nil
		}
	}
	return 0, reconcile.Terminal(fmt.Errorf("used workload_instance %q has no Service port (its definition declares no container port)", used.Name))
}

// missingOn names a used instance that is not placed on the runtime, if any.
func (d *dependencies) missingOn(runtimeID string) string {
	for _, u := range d.used {
		if !slices.ContainsFunc(u.Status.Placements, func(p client.PlacementStatus) bool { return p.RuntimeID == runtimeID && p.Phase == client.PhaseReady }) {
			return u.Name
		}
	}
	return ""
}

// inject adds the dependencies to rendered objects: a Kubernetes Secret per secret, and in every pod
// template the variables (or the mounted files) and the hash that rolls the pods when they change.
func (d *dependencies) inject(objs []*unstructured.Unstructured, ns string, extra onRuntime) []*unstructured.Unstructured {
	if d.hash == "" && extra.hash == "" {
		return objs
	}
	hash := d.hash + extra.hash
	objs = append(objs, extra.objs...)
	env := append([]any{}, extra.env...)
	var volumes, mounts []any
	for _, s := range d.secrets {
		name := "qleet-secret-" + s.Name
		data := map[string]any{}
		for k, v := range s.Spec.Values {
			data[k] = base64.StdEncoding.EncodeToString([]byte(v))
		}
		sec := &unstructured.Unstructured{Object: map[string]any{"type": "Opaque", "data": data}}
		sec.SetAPIVersion("v1")
		sec.SetKind("Secret")
		sec.SetName(name)
		sec.SetNamespace(ns)
		objs = append(objs, sec)
		if s.Spec.MountPath != "" {
			volumes = append(volumes, map[string]any{"name": name, "secret": map[string]any{"secretName": name}})
			mounts = append(mounts, map[string]any{"name": name, "mountPath": s.Spec.MountPath, "readOnly": true})
			continue
		}
		for _, k := range sortedKeys(s.Spec.Values) {
			env = append(env, map[string]any{"name": k, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": name, "key": k}}})
		}
	}
	for _, e := range d.env {
		env = append(env, e)
	}
	for _, o := range objs {
		path := podTemplatePath(o.GetKind())
		if path == nil {
			continue
		}
		tmpl, ok, _ := unstructured.NestedMap(o.Object, path...)
		if !ok {
			continue
		}
		ann, _, _ := unstructured.NestedStringMap(tmpl, "metadata", "annotations")
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationDependencies] = hash
		_ = unstructured.SetNestedStringMap(tmpl, ann, "metadata", "annotations")
		containers, _, _ := unstructured.NestedSlice(tmpl, "spec", "containers")
		for i, c := range containers {
			cm, _ := c.(map[string]any)
			if cm == nil {
				continue
			}
			cur, _, _ := unstructured.NestedSlice(cm, "env")
			cm["env"] = append(cur, env...)
			if len(mounts) > 0 {
				vm, _, _ := unstructured.NestedSlice(cm, "volumeMounts")
				cm["volumeMounts"] = append(vm, mounts...)
			}
			containers[i] = cm
		}
		_ = unstructured.SetNestedSlice(tmpl, containers, "spec", "containers")
		if len(volumes) > 0 {
			vs, _, _ := unstructured.NestedSlice(tmpl, "spec", "volumes")
			_ = unstructured.SetNestedSlice(tmpl, append(vs, volumes...), "spec", "volumes")
		}
		_ = unstructured.SetNestedMap(o.Object, tmpl, path...)
	}
	return objs
}

// podTemplatePath is where a workload kind keeps its pod template.
func podTemplatePath(kind string) []string {
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		return []string{"spec", "template"}
	case "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template"}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
