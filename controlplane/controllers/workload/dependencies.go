package workload

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// AnnotationDependencies changes when what an instance's pods get from its dependencies changes (secret
// values, data service credentials, the addresses of the instances it uses), which rolls the pods. It
// is a hash of versions, never of values: each secret counts by its id and generation (which a new
// value bumps, and re-sending the same values does not), and each data service's credentials by their
// Kubernetes Secret's uid and resourceVersion. Anyone who can read a Deployment can read the annotation,
// so a hash of the values themselves would let them test guesses of a secret offline.
const AnnotationDependencies = "qleetos.io/dependencies"

// dependencies are what an instance consumes beyond its definition: the secrets that serve it and the
// instances it uses, resolved for one reconcile.
type dependencies struct {
	secrets   []*api.Secret
	databases []*api.Database
	buckets   []*api.Bucket
	env       []map[string]any // plain variables for the instances it uses
	used      []*api.WorkloadInstance
	uses      []api.Use // the spec's use of each of used
	hash      string
}

// dependencies resolves the instance's dependencies, or says which one it waits on (a WaitError naming
// it) or which Failed (a Terminal error with its reason). It records the secrets in the instance's
// status; the secret controller wakes the instances a secret serves when it changes.
func (r *InstanceReconciler) dependencies(ctx context.Context, inst *api.WorkloadInstance) (*dependencies, error) {
	d := &dependencies{}
	h := sha256.New()
	var refs []api.ObjectRef
	lk := r.lookups(ctx)
	// Reverse lookups from the store's reference index (the secrets and data services that name the
	// instance), and reads by id of the data services the instance names: never a list of a whole kind.
	for s, err := range lk.SecretsServing(ctx, inst.ID) {
		if err != nil {
			return nil, fmt.Errorf("list the secrets that serve it: %w", err)
		}
		if s.DeletionRequestedAt != nil || !slices.Contains(s.Spec.InstanceIDs, inst.ID) {
			continue
		}
		refs = append(refs, api.ObjectRef{Kind: api.KindSecret, ID: s.ID, Name: s.Name})
		d.secrets = append(d.secrets, s)
	}
	var err error
	if d.databases, err = dataServices(ctx, inst, lk.DatabasesReferencing(ctx, inst.ID), lk.Databases, inst.Spec.Databases,
		func(db *api.Database) string { return db.Spec.InstanceID }); err != nil {
		return nil, err
	}
	for _, db := range d.databases {
		refs = append(refs, api.ObjectRef{Kind: api.KindDatabase, ID: db.ID, Name: db.Name})
	}
	if d.buckets, err = dataServices(ctx, inst, lk.BucketsReferencing(ctx, inst.ID), lk.Buckets, inst.Spec.Buckets,
		func(b *api.Bucket) string { return b.Spec.InstanceID }); err != nil {
		return nil, err
	}
	for _, b := range d.buckets {
		refs = append(refs, api.ObjectRef{Kind: api.KindBucket, ID: b.ID, Name: b.Name})
	}
	inst.Status.Dependencies = refs
	sort.Slice(d.secrets, func(i, j int) bool { return d.secrets[i].Name < d.secrets[j].Name })
	for _, s := range d.secrets {
		if !api.Reconciled(s.Generation, &s.Status.Status) {
			return nil, reconcile.Wait(fmt.Sprintf("secret %q", s.Name), string(s.Status.Phase), "SecretNotReady", 5*time.Second)
		}
		// The version, not the values (AnnotationDependencies); the generation covers the mount path too.
		fmt.Fprintf(h, "secret %s %s %d\n", s.Name, s.ID, s.Generation)
	}
	for _, u := range inst.Spec.Uses {
		used, err := r.lookups(ctx).Instances.RequireReady(ctx, u.InstanceID)
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
		d.uses = append(d.uses, u)
	}
	if len(d.secrets) > 0 || len(d.env) > 0 {
		d.hash = hex.EncodeToString(h.Sum(nil))[:16]
	}
	return d, nil
}

// dataServices are the data services of one kind that serve the instance, by id: those whose
// spec.instance_id names it (referencing, from the reference index) and those its spec lists (named, read
// by id). One being deleted, or named but gone, does not count.
func dataServices[S any, T any](ctx context.Context, inst *api.WorkloadInstance, referencing iter.Seq2[*api.Object[S, T], error],
	deps *reconcile.Deps[S, T], named []string, instanceOf func(*api.Object[S, T]) string) ([]*api.Object[S, T], error) {
	kind := deps.Resource.Kind()
	byID := map[string]*api.Object[S, T]{}
	for o, err := range referencing {
		if err != nil {
			return nil, fmt.Errorf("list the %ss that serve it: %w", kind, err)
		}
		if instanceOf(o) == inst.ID {
			byID[o.ID] = o
		}
	}
	for _, id := range named {
		if _, ok := byID[id]; ok {
			continue
		}
		o, err := deps.Get(ctx, id)
		if api.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get %s %s: %w", kind, id, err)
		}
		byID[id] = o
	}
	out := make([]*api.Object[S, T], 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		if byID[id].DeletionRequestedAt == nil {
			out = append(out, byID[id])
		}
	}
	return out, nil
}

// onRuntime is what the instance's pods get on one runtime beyond the instance-wide dependencies: the
// connection details of its databases there.
type onRuntime struct {
	objs []*unstructured.Unstructured
	env  []any
	hash string
}

// servicePort is the port of a used instance's Service: its definition's first container port.
func (r *InstanceReconciler) servicePort(ctx context.Context, used *api.WorkloadInstance) (int32, error) {
	def, err := r.lookups(ctx).Definitions.Get(ctx, used.Spec.DefinitionID)
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

// dataService is a database or a bucket as the instance sees it: where it runs on a runtime, and the
// variables its credentials make.
type dataService struct {
	kind, id, name string
	status         *api.Status
	generation     int64
	home           *api.DataHome
	runtimes       []api.DataRuntimeStatus
	env            func(at *api.DataRuntimeStatus, creds map[string][]byte) map[string]string
}

func (d *dependencies) dataServices() []dataService {
	var out []dataService
	for _, db := range d.databases {
		spec := db.Spec
		out = append(out, dataService{kind: api.KindDatabase, id: db.ID, name: db.Name, status: &db.Status.Status, generation: db.Generation, home: db.Status.Home, runtimes: db.Status.Runtimes,
			env: func(at *api.DataRuntimeStatus, c map[string][]byte) map[string]string {
				eng, p := render.EngineOf(&spec), spec.EnvPrefix
				user, pass, name := string(c["username"]), string(c["password"]), string(c["database"])
				env := map[string]string{
					p + "_URL": api.DatabaseURL(eng.Scheme, user, pass, at.Host, at.Port, name), p + "_HOST": at.Host,
					p + "_PORT": strconv.Itoa(int(at.Port)), p + "_NAME": name, p + "_USER": user, p + "_PASSWORD": pass,
				}
				if spec.ReplicasPerRegion > 0 {
					// Its region's read replicas, else the home: a database without replicas adds no
					// variable, so that its consumers do not roll.
					read := cmp.Or(at.ReadHost, at.Host)
					env[p+"_READ_URL"], env[p+"_READ_HOST"] = api.DatabaseURL(eng.Scheme, user, pass, read, at.Port, name), read
					env[p+"_READ_PORT"] = strconv.Itoa(int(at.Port))
				}
				return env
			}})
	}
	for _, b := range d.buckets {
		name, p := b.Name, b.Spec.EnvPrefix
		out = append(out, dataService{kind: api.KindBucket, id: b.ID, name: b.Name, status: &b.Status.Status, generation: b.Generation, home: b.Status.Home, runtimes: b.Status.Runtimes,
			env: func(at *api.DataRuntimeStatus, c map[string][]byte) map[string]string {
				return map[string]string{
					p + "_ENDPOINT": cmp.Or(at.Endpoint, fmt.Sprintf("http://%s:%d", at.Host, at.Port)), p + "_BUCKET": cmp.Or(at.CloudID, name),
					p + "_REGION":        cmp.Or(at.Region, "us-east-1"),
					p + "_ACCESS_KEY_ID": string(c["access_key"]), p + "_SECRET_ACCESS_KEY": string(c["secret_key"]),
				}
			}})
	}
	return out
}

// servesOn is the data service where it serves the consumers of a runtime, once Ready there: its home,
// or its access to the home there. A copy of the data from before it had one home serves no one.
func (s dataService) servesOn(runtimeID string) *api.DataRuntimeStatus {
	for i, rs := range s.runtimes {
		if rs.RuntimeID == runtimeID && rs.Phase == api.PhaseReady && (s.home == nil || rs.Role != "") {
			return &s.runtimes[i]
		}
	}
	return nil
}

// dataServiceRefs names the instance's databases and buckets.
func (d *dependencies) dataServiceRefs() []api.ObjectRef {
	var out []api.ObjectRef
	for _, s := range d.dataServices() {
		out = append(out, api.ObjectRef{Kind: s.kind, ID: s.id, Name: s.name})
	}
	return out
}

// notOn says why the data service does not serve a runtime yet, without claiming a phase it does not
// have there: its overall phase may be Ready while it is not yet on this runtime.
func (s dataService) notOn(runtime string) string {
	for _, rs := range s.runtimes {
		if rs.Runtime == runtime && rs.Message != "" {
			return fmt.Sprintf("not ready on kubernetes_runtime %q yet: %s", runtime, rs.Message)
		}
	}
	if s.status.Phase == api.PhaseReady || s.status.Phase == "" {
		// Ready elsewhere, or not reconciled yet: it has not caught up with a consumer on this runtime.
		return fmt.Sprintf("not on kubernetes_runtime %q yet", runtime)
	}
	state := string(s.status.Phase)
	if s.status.Message != "" {
		state += ": " + s.status.Message
	}
	return fmt.Sprintf("%s, not yet on kubernetes_runtime %q", state, runtime)
}

// dataOn waits until every database and bucket of the instance is Ready on the runtime, and returns a
// Secret in the instance's namespace per data service with its connection details, read from its
// credentials there (a database's <PREFIX>_URL, _HOST, _PORT, _NAME, _USER, _PASSWORD, and with read
// replicas _READ_URL, _READ_HOST, _READ_PORT; a bucket's
// <PREFIX>_ENDPOINT, _BUCKET, _REGION, _ACCESS_KEY_ID, _SECRET_ACCESS_KEY), with the variables that
// reference it. A Failed one fails the instance with its reason.
func (r *InstanceReconciler) dataOn(ctx context.Context, cl *kube.Cluster, d *dependencies, rt *api.KubernetesRuntime, ns string) (onRuntime, error) {
	var out onRuntime
	services := d.dataServices()
	h := sha256.New()
	for _, s := range services {
		at := s.servesOn(rt.ID)
		if at == nil || s.status.ObservedGeneration != s.generation {
			if s.status.Phase == api.PhaseFailed && s.status.ObservedGeneration == s.generation {
				return out, reconcile.Terminal(fmt.Errorf("%s %q failed: %s", s.kind, s.name, s.status.Message))
			}
			// It may not know yet that this instance runs there (an instance that lists it is not
			// an edge it is told about): ask it to look.
			if err := r.Client.Raw(s.kind).RequestReconcile(ctx, s.id); err != nil && !api.IsNotFound(err) {
				return out, fmt.Errorf("notify %s %q: %w", s.kind, s.name, err)
			}
			return out, reconcile.Wait(fmt.Sprintf("%s %q", s.kind, s.name), s.notOn(rt.Name), "DataServiceNotReady", 5*time.Second)
		}
		creds, err := cl.Clientset.CoreV1().Secrets(at.Namespace).Get(ctx, render.CredentialsSecretFor(at.Role), metav1.GetOptions{})
		if err != nil {
			return out, fmt.Errorf("read the credentials of %s %q: %w", s.kind, s.name, err)
		}
		values := s.env(at, creds.Data)
		secretName := "qleet-" + s.kind + "-" + s.name
		data := map[string]any{}
		// The values come from where the service runs and from its credentials: hash where it runs and
		// the credentials' version, never the values (AnnotationDependencies).
		fmt.Fprintf(h, "%s %s at %s:%d %s %s %s %s credentials %s %s\n", s.kind, s.id, at.Host, at.Port, at.Endpoint, at.Region, at.CloudID,
			at.Namespace, creds.UID, creds.ResourceVersion)
		if at.ReadHost != "" {
			fmt.Fprintf(h, "read %s\n", at.ReadHost) // only when set: instances without replicas keep their hash
		}
		for _, k := range slices.Sorted(maps.Keys(values)) {
			data[k] = base64.StdEncoding.EncodeToString([]byte(values[k]))
			out.env = append(out.env, map[string]any{"name": k, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": secretName, "key": k}}})
			fmt.Fprintf(h, "%s\n", k)
		}
		sec := &unstructured.Unstructured{Object: map[string]any{"type": "Opaque", "data": data}}
		sec.SetAPIVersion("v1")
		sec.SetKind("Secret")
		sec.SetName(secretName)
		sec.SetNamespace(ns)
		out.objs = append(out.objs, sec)
	}
	if len(services) > 0 {
		out.hash = hex.EncodeToString(h.Sum(nil))[:16]
	}
	return out, nil
}

// whyMissing says why a used instance is not on a runtime: it is being placed there (it follows its
// consumers), or nothing places it there.
func (d *dependencies) whyMissing(name, runtime string) string {
	for i, u := range d.used {
		if u.Name != name {
			continue
		}
		if d.uses[i].Placement == api.UseWithConsumers {
			return fmt.Sprintf("being placed on kubernetes_runtime %q, where this instance runs (placement with_consumers)", runtime)
		}
		return fmt.Sprintf("not placed on kubernetes_runtime %q, where this instance runs: its own placement does not put it there (set placement = \"with_consumers\" on the use, or place it there)", runtime)
	}
	return fmt.Sprintf("not on kubernetes_runtime %q", runtime)
}

// missingOn names a used instance that is not placed on the runtime, if any.
func (d *dependencies) missingOn(runtimeID string) string {
	for _, u := range d.used {
		if !slices.ContainsFunc(u.Status.Placements, func(p api.PlacementStatus) bool { return p.RuntimeID == runtimeID && p.Phase == api.PhaseReady }) {
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
		for _, k := range slices.Sorted(maps.Keys(s.Spec.Values)) {
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
