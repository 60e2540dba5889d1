package workload

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
)

// BenchmarkInstanceDependencyLookups measures the reads an instance's reconcile makes to find what serves
// it (its secrets, databases and buckets), with 1,000 and 10,000 secrets of other instances in the
// store (a real API server on SQLite), side by side:
//
//   - whole-kind-list: as before issue 30, list every secret, database and bucket and keep the
//     instance's;
//   - index: InstanceReconciler.dependencies, which asks the store's reference and user indexes
//     (reconcile.Lookups).
//
// The ratio of the two at each size, and each one's growth from 1k to 10k, go to docs/benchmarks.md.
func BenchmarkInstanceDependencyLookups(b *testing.B) {
	ctx := context.Background()
	svc := apitest.Start(b)
	admin, ctrl := svc.Client(b, server.RoleAdmin), svc.Client(b, server.RoleController)
	inst := &api.WorkloadInstance{Meta: api.Meta{ID: "bench-instance", Name: "bench"}}
	own, err := admin.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: "own"},
		Spec: api.SecretSpec{InstanceIDs: []string{inst.ID}, Values: map[string]string{"KEY": "v"}}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ctrl.Secrets().UpdateStatus(ctx, own.ID, own.ResourceVersion, api.SecretStatus{
		Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: own.Generation}}); err != nil {
		b.Fatal(err)
	}
	r := &InstanceReconciler{Client: ctrl}
	others := 0
	for _, n := range []int{1000, 10000} {
		seedOtherSecrets(b, admin, others, n-others)
		others = n
		b.Run(fmt.Sprintf("whole-kind-list/others=%d", n), func(b *testing.B) {
			for b.Loop() {
				secrets, err := dependenciesByListing(ctx, ctrl, inst)
				if err != nil || len(secrets) != 1 {
					b.Fatalf("%d secrets, %v", len(secrets), err)
				}
			}
		})
		b.Run(fmt.Sprintf("index/others=%d", n), func(b *testing.B) {
			for b.Loop() {
				d, err := r.dependencies(ctx, inst)
				if err != nil || len(d.secrets) != 1 {
					b.Fatalf("%v", err)
				}
			}
		})
	}
}

// seedOtherSecrets creates n secrets, each serving another instance, numbered from first.
func seedOtherSecrets(b *testing.B, admin *client.Client, first, n int) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := first + w; i < first+n; i += 8 {
				if _, err := admin.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: fmt.Sprintf("other-%d", i)},
					Spec: api.SecretSpec{InstanceIDs: []string{fmt.Sprintf("other-instance-%d", i)}, Values: map[string]string{"KEY": "v"}}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// dependenciesByListing is how an instance's reconcile found its secrets, databases and buckets before
// issue 30: a list of each whole kind, filtered here.
func dependenciesByListing(ctx context.Context, cl *client.Client, inst *api.WorkloadInstance) ([]*api.Secret, error) {
	var secrets []*api.Secret
	for s, err := range cl.Secrets().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, err
		}
		if s.DeletionRequestedAt == nil && slices.Contains(s.Spec.InstanceIDs, inst.ID) {
			secrets = append(secrets, s)
		}
	}
	for _, err := range cl.Databases().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, err
		}
	}
	for _, err := range cl.Buckets().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, err
		}
	}
	return secrets, nil
}
