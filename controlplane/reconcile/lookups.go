package reconcile

import (
	"context"
	"errors"
	"iter"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// Lookups are the reads a reconcile makes of objects other than its own, handed to every reconciler by
// the runtime (see LookupsFrom), so that a reconciler holds domain logic only and no wiring of its own:
//
//   - forward lookups (the runtime an instance runs on, its definition, the instances it uses): a Deps per
//     kind, shared by every controller of the process, so that concurrent reconciles share their reads;
//   - reverse lookups (a definition's instances, the secrets that serve an instance, a profile's
//     runtimes): filtered lists served by the store's reference and label indexes (object_refs by
//     to_id, object_labels by key and value). A reverse lookup costs what it returns, never the size of
//     the kind, and no reconcile lists a whole kind (TestNoReconcileListsAWholeKind).
//
// The indexes live in the store, not in a replica's memory: they are written in the transaction of the
// write that changes a reference or a label, so any number of controller replicas read the same answer,
// and a replica that restarts has nothing to rebuild or to catch up on.
type Lookups struct {
	// Runtimes reads kubernetes_runtimes (with a controller token, their kubeconfigs).
	Runtimes *Deps[api.KubernetesRuntimeSpec, api.KubernetesRuntimeStatus]
	// Profiles reads runtime_profiles.
	Profiles *Deps[api.RuntimeProfileSpec, api.RuntimeProfileStatus]
	// Definitions reads workload_definitions.
	Definitions *Deps[api.WorkloadDefinitionSpec, api.WorkloadDefinitionStatus]
	// Instances reads workload_instances.
	Instances *Deps[api.WorkloadInstanceSpec, api.WorkloadInstanceStatus]
	// Secrets reads secrets.
	Secrets *Deps[api.SecretSpec, api.SecretStatus]
	// Databases reads databases.
	Databases *Deps[api.DatabaseSpec, api.DatabaseStatus]
	// Buckets reads buckets.
	Buckets *Deps[api.BucketSpec, api.BucketStatus]
	// SupportServices reads support_services.
	SupportServices *Deps[api.SupportServiceSpec, api.SupportServiceStatus]

	cl *client.Client
}

// NewLookups returns lookups that read through cl. Controllers of one process share one (the runtime
// makes one per client when Config.Lookups is nil).
func NewLookups(cl *client.Client) *Lookups {
	return &Lookups{
		Runtimes:        &Deps[api.KubernetesRuntimeSpec, api.KubernetesRuntimeStatus]{Resource: cl.KubernetesRuntimes()},
		Profiles:        &Deps[api.RuntimeProfileSpec, api.RuntimeProfileStatus]{Resource: cl.RuntimeProfiles()},
		Definitions:     &Deps[api.WorkloadDefinitionSpec, api.WorkloadDefinitionStatus]{Resource: cl.WorkloadDefinitions()},
		Instances:       &Deps[api.WorkloadInstanceSpec, api.WorkloadInstanceStatus]{Resource: cl.WorkloadInstances()},
		Secrets:         &Deps[api.SecretSpec, api.SecretStatus]{Resource: cl.Secrets()},
		Databases:       &Deps[api.DatabaseSpec, api.DatabaseStatus]{Resource: cl.Databases()},
		Buckets:         &Deps[api.BucketSpec, api.BucketStatus]{Resource: cl.Buckets()},
		SupportServices: &Deps[api.SupportServiceSpec, api.SupportServiceStatus]{Resource: cl.SupportServices()},
		cl:              cl,
	}
}

// Client is the client the lookups read through.
func (l *Lookups) Client() *client.Client { return l.cl }

// InstancesReferencing lists the workload_instances whose spec or status names id: a definition's or a
// runtime's instances, the instances whose spec.databases or spec.buckets name a data service, the
// instances that use another one.
func (l *Lookups) InstancesReferencing(ctx context.Context, id string) iter.Seq2[*api.WorkloadInstance, error] {
	return Referencing(ctx, l.cl.WorkloadInstances(), id)
}

// SecretsServing lists the secrets whose spec.instance_ids name the instance.
func (l *Lookups) SecretsServing(ctx context.Context, instanceID string) iter.Seq2[*api.Secret, error] {
	return Referencing(ctx, l.cl.Secrets(), instanceID)
}

// DatabasesReferencing lists the databases that name id (a database's spec.instance_id, its home runtime).
func (l *Lookups) DatabasesReferencing(ctx context.Context, id string) iter.Seq2[*api.Database, error] {
	return Referencing(ctx, l.cl.Databases(), id)
}

// BucketsReferencing lists the buckets that name id (a bucket's spec.instance_id, its home runtime).
func (l *Lookups) BucketsReferencing(ctx context.Context, id string) iter.Seq2[*api.Bucket, error] {
	return Referencing(ctx, l.cl.Buckets(), id)
}

// SupportServicesReferencing lists the support_services that name id (those installed on a runtime).
func (l *Lookups) SupportServicesReferencing(ctx context.Context, id string) iter.Seq2[*api.SupportService, error] {
	return Referencing(ctx, l.cl.SupportServices(), id)
}

// RuntimesOfProfile lists the kubernetes_runtimes provisioned from the named runtime_profile (by the
// label placement puts on them).
func (l *Lookups) RuntimesOfProfile(ctx context.Context, profile string) iter.Seq2[*api.KubernetesRuntime, error] {
	return Labelled(ctx, l.cl.KubernetesRuntimes(), api.LabelProfile+"="+profile)
}

// ErrWholeKind is returned by a reverse lookup asked with an empty key: it would list the whole kind.
var ErrWholeKind = errors.New("a reverse lookup needs an id or a label selector: an empty one would list the whole kind")

// Referencing lists the objects of res's kind whose spec or status names id, from the store's reference
// index.
func Referencing[S any, T any](ctx context.Context, res *client.Resource[S, T], id string) iter.Seq2[*api.Object[S, T], error] {
	if id == "" {
		return failed[S, T](ErrWholeKind)
	}
	return res.All(ctx, client.ListOptions{References: id})
}

// Labelled lists the objects of res's kind that carry every label of selector ("k=v,k2=v2"), from the
// store's label index.
func Labelled[S any, T any](ctx context.Context, res *client.Resource[S, T], selector string) iter.Seq2[*api.Object[S, T], error] {
	if selector == "" {
		return failed[S, T](ErrWholeKind)
	}
	return res.All(ctx, client.ListOptions{LabelSelector: selector})
}

func failed[S any, T any](err error) iter.Seq2[*api.Object[S, T], error] {
	return func(yield func(*api.Object[S, T], error) bool) { yield(nil, err) }
}

type lookupsKey struct{}

// withLookups gives the reconcile running in ctx the runtime's lookups.
func withLookups(ctx context.Context, l *Lookups) context.Context {
	return context.WithValue(ctx, lookupsKey{}, l)
}

// LookupsFrom returns the lookups the runtime handed the reconcile running in ctx. Outside the runtime
// (a test that calls Reconcile itself) it returns new lookups over cl, which read the same objects
// without sharing reads with other reconciles.
func LookupsFrom(ctx context.Context, cl *client.Client) *Lookups {
	if l, ok := ctx.Value(lookupsKey{}).(*Lookups); ok && l != nil {
		return l
	}
	return NewLookups(cl)
}
