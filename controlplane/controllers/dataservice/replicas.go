package dataservice

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// Read replicas: a database with replicas_per_region runs them in each region where a consumer runs, on
// the first runtime there that a consumer runs on (plan order: the home first). They stream from the
// home: on the home runtime from its Service, elsewhere through the alias Service that reaches it. The
// consumers on that runtime read from them (DataRuntimeStatus.ReadHost); everyone writes to the home.

// replicaHBAPath is where the home reads its client authentication when it has replicas: the image's
// default allows replication connections from the pod itself only.
const replicaHBAPath = "/etc/qleet/pg_hba.conf"

// replicaHBA lets clients and replicas in with a password; local connections (the image's own
// initialisation) are trusted, as the image's default does.
const replicaHBA = `local all all trust
host all all all scram-sha-256
host replication all all scram-sha-256
`

// placeReplicas sets each site's replicas: n on the first site of every region where a consumer runs.
func (r *Reconciler[S, T]) placeReplicas(ctx context.Context, plan []site, insts []*api.WorkloadInstance, n int) error {
	if n == 0 {
		return nil
	}
	seen := map[string]bool{}
	for i, s := range plan {
		if s.role == "" || (s.role == api.DataRoleHome && len(namespacesOn(insts, s.runtimeID)) == 0) {
			continue // an old copy, or a home no consumer runs on
		}
		rt, err := r.lookups(ctx).Runtimes.Get(ctx, s.runtimeID)
		if api.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		region := cmp.Or(rt.Spec.Region, rt.Status.Region)
		if !seen[region] {
			seen[region] = true
			plan[i].replicas = n
		}
	}
	return nil
}

// replicaObjects run n read replicas of a postgres database beside the runtime's consumers, cloned from
// the home at primaryHost with the credentials in secret, and the Service they are read through.
func replicaObjects(svc Service, primaryHost, secret string, n int) []map[string]any {
	labels := map[string]any{"app.kubernetes.io/name": render.ReadService}
	fromSecret := func(name, key string) map[string]any {
		return map[string]any{"name": name, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": secret, "key": key}}}
	}
	// A subdirectory: a volume's root may hold lost+found, which pg_basebackup refuses.
	pgdata := path.Join(svc.DataDir, "replica")
	env := []any{
		map[string]any{"name": "PGDATA", "value": pgdata},
		fromSecret("PGUSER", "username"), fromSecret("PGPASSWORD", "password"), fromSecret("POSTGRES_PASSWORD", "password"),
		map[string]any{"name": "PRIMARY_HOST", "value": primaryHost},
		map[string]any{"name": "PRIMARY_PORT", "value": fmt.Sprint(svc.Port)},
	}
	mounts := []any{map[string]any{"name": "data", "mountPath": svc.DataDir}}
	clone := map[string]any{
		"name": "clone", "image": svc.Image, "env": env, "volumeMounts": mounts,
		// A new replica copies the home once, and then follows it (-R writes its standby settings).
		"command": []any{"sh", "-c", `[ -s "$PGDATA/PG_VERSION" ] || pg_basebackup -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -D "$PGDATA" -R -X stream`},
	}
	main := map[string]any{
		"name": "main", "image": svc.Image, "env": env, "volumeMounts": mounts,
		"ports":          []any{map[string]any{"containerPort": int64(svc.Port)}},
		"readinessProbe": map[string]any{"exec": map[string]any{"command": []any{"pg_isready", "-h", "127.0.0.1"}}},
	}
	port := []any{map[string]any{"name": "main", "port": int64(svc.Port), "targetPort": int64(svc.Port)}}
	return []map[string]any{
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": render.ReadService, "namespace": svc.Namespace},
			"spec": map[string]any{"selector": labels, "ports": port}},
		{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": render.ReadService, "namespace": svc.Namespace}, "spec": map[string]any{
			"serviceName": render.ReadService, "replicas": int64(n),
			"selector": map[string]any{"matchLabels": labels},
			// A replica's volume is a copy of the home's: it goes with the replica.
			"persistentVolumeClaimRetentionPolicy": map[string]any{"whenDeleted": "Delete", "whenScaled": "Delete"},
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
				"initContainers": []any{clone}, "containers": []any{main}}},
			"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "data"}, "spec": map[string]any{
				"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": svc.Size}}}}},
		}},
	}
}

// streamingHome makes the home's objects accept its replicas: its client authentication from a
// ConfigMap that allows replication connections.
func streamingHome(svc Service, objs []map[string]any, container map[string]any, pod map[string]any) []map[string]any {
	args, _ := container["args"].([]any)
	mounts, _ := container["volumeMounts"].([]any)
	container["args"] = append(args, "-c", "hba_file="+replicaHBAPath)
	container["volumeMounts"] = append(mounts, map[string]any{"name": "hba", "mountPath": path.Dir(replicaHBAPath)})
	pod["volumes"] = []any{map[string]any{"name": "hba", "configMap": map[string]any{"name": render.ReplicaHBA}}}
	return append(objs, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": render.ReplicaHBA, "namespace": svc.Namespace},
		"data": map[string]any{"pg_hba.conf": replicaHBA}})
}

// readHost is where the consumers on a runtime with replicas read.
func readHost(ns string) string {
	return fmt.Sprintf("%s.%s.svc.cluster.local", render.ReadService, ns)
}

// pruneDropped deletes what the data service applied on a runtime before and applies no more (read
// replicas turned off, an exposure no runtime needs): only when something was dropped, so that a steady
// reconcile lists nothing.
func pruneDropped(ctx context.Context, cl *kube.Cluster, owner kube.Owner, applied []kube.AppliedRef) error {
	same := func(a, b kube.AppliedRef) bool {
		return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name
	}
	for _, p := range owner.Previous {
		if !slices.ContainsFunc(applied, func(a kube.AppliedRef) bool { return same(a, p) }) {
			_, err := kube.Prune(ctx, cl, owner, applied)
			return err
		}
	}
	return nil
}
