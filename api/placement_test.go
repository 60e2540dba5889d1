package api_test

import (
	"testing"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/stretchr/testify/require"
)

func fieldsOf(fes []api.FieldError) map[string]string {
	out := map[string]string{}
	for _, fe := range fes {
		out[fe.Field] = fe.Message
	}
	return out
}

func TestValidateRuntimeProfile(t *testing.T) {
	t.Parallel()
	ki, _ := api.LookupKind(api.KindRuntimeProfile)
	check := func(s api.RuntimeProfileSpec) map[string]string {
		ki.Default(&s)
		return fieldsOf(ki.Validate(&s))
	}
	require.Empty(t, check(api.RuntimeProfileSpec{Provider: "local", Regions: []string{"eu-west", "us-east"}, MinNodes: 1, MaxNodes: 5, ReclaimAfter: "30m"}))
	s := api.RuntimeProfileSpec{Provider: "local", Regions: []string{"eu-west"}, MinNodes: 4, MaxNodes: 6}
	ki.Default(&s)
	require.Equal(t, 4, s.Nodes, "nodes default to min_nodes when that is more than 3")

	errs := check(api.RuntimeProfileSpec{Provider: "gke", Regions: []string{"eu-west", "eu-west", "EU"}, MinNodes: 5, MaxNodes: 2,
		KubernetesVersion: "1.31", RuntimeLabels: map[string]string{"bad key!": "x"}, ReclaimAfter: "-5s"})
	require.Contains(t, errs["spec.provider"], `must be local or eks, not "gke"`)
	require.Contains(t, errs["spec.regions[1]"], `duplicate region "eu-west"`)
	require.Contains(t, errs["spec.regions[2]"], "lower case")
	require.Contains(t, errs["spec.min_nodes"], "must not exceed max_nodes")
	require.Contains(t, errs["spec.kubernetes_version"], "v1.31")
	require.Contains(t, errs[`spec.runtime_labels["bad key!"]`], "key")
	require.Contains(t, errs["spec.reclaim_after"], "positive duration")
	require.Contains(t, check(api.RuntimeProfileSpec{Provider: "local"})["spec.regions"], "at least one region")
}

func TestRuntimeProfilesOverlap(t *testing.T) {
	t.Parallel()
	ki, _ := api.LookupKind(api.KindRuntimeProfile)
	peers := []api.NamedSpec{
		{Name: "default", Spec: &api.RuntimeProfileSpec{Regions: []string{"eu-west", "us-east"}}},
		{Name: "gpu", Spec: &api.RuntimeProfileSpec{Regions: []string{"eu-west"}, RuntimeLabels: map[string]string{"gpu": "true"}, Priority: 10}},
	}
	// Shares eu-west with "default" at the same priority: refused, naming both.
	errs := fieldsOf(ki.ValidatePeers(&api.RuntimeProfileSpec{Regions: []string{"ap-south", "eu-west"}}, peers))
	require.Contains(t, errs["spec.priority"], `runtime_profile "default" also serves region "eu-west"`)
	// Another priority, other regions, or conflicting labels do not overlap.
	require.Empty(t, ki.ValidatePeers(&api.RuntimeProfileSpec{Regions: []string{"eu-west"}, Priority: 5}, peers))
	require.Empty(t, ki.ValidatePeers(&api.RuntimeProfileSpec{Regions: []string{"ap-south"}}, peers))
	require.Empty(t, ki.ValidatePeers(&api.RuntimeProfileSpec{Regions: []string{"eu-west"}, Priority: 10, RuntimeLabels: map[string]string{"gpu": "false"}}, peers))
	require.NotEmpty(t, ki.ValidatePeers(&api.RuntimeProfileSpec{Regions: []string{"eu-west"}, Priority: 10, RuntimeLabels: map[string]string{"zone": "a"}}, peers))
}

func TestValidatePlacement(t *testing.T) {
	t.Parallel()
	ki, _ := api.LookupKind(api.KindWorkloadInstance)
	check := func(s api.WorkloadInstanceSpec) map[string]string {
		s.DefinitionID = "d"
		return fieldsOf(ki.Validate(&s))
	}
	require.Empty(t, check(api.WorkloadInstanceSpec{Placement: &api.Placement{Regions: []string{"eu-west", "us-east"},
		Replicas: &api.PlacementReplicas{Mode: "weighted", Weights: map[string]int{"eu-west": 3, "us-east": 1}}}}))
	require.Empty(t, check(api.WorkloadInstanceSpec{}), "with neither, it runs where its consumers with placement with_consumers run")
	require.Contains(t, check(api.WorkloadInstanceSpec{Uses: []api.Use{{InstanceID: "u", EnvPrefix: "U", Placement: "everywhere"}}})["spec.uses[0].placement"],
		`must be "own" or "with_consumers", not "everywhere"`)
	require.Contains(t, check(api.WorkloadInstanceSpec{RuntimeID: "r", Placement: &api.Placement{Regions: []string{"a"}}})["spec.placement"], "must not be set with spec.runtime_id")

	errs := check(api.WorkloadInstanceSpec{Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}, Spread: "runtimes", Runtimes: 1,
		Replicas: &api.PlacementReplicas{Mode: "weighted", Weights: map[string]int{"eu-west": 1, "mars": 2}},
		Failover: &api.Failover{TolerationSeconds: -1}}})
	require.Contains(t, errs["spec.placement.runtimes"], "between the number of regions (2) and 64")
	require.Contains(t, errs[`spec.placement.replicas.weights["us-east"]`], "positive weight")
	require.Contains(t, errs[`spec.placement.replicas.weights["mars"]`], "not in spec.placement.regions")
	require.Contains(t, errs["spec.placement.failover.toleration_seconds"], "between 0 and 86400")
	errs = check(api.WorkloadInstanceSpec{Placement: &api.Placement{Regions: []string{"a"}, Spread: "zones", Replicas: &api.PlacementReplicas{Mode: "x"}}})
	require.Contains(t, errs["spec.placement.spread"], `not "zones"`)
	require.Contains(t, errs["spec.placement.replicas.mode"], `not "x"`)
	require.Contains(t, check(api.WorkloadInstanceSpec{Placement: &api.Placement{}})["spec.placement.regions"], "at least one region")

	sk, _ := api.LookupKind(api.KindWorkloadInstance)
	st := &api.WorkloadInstanceStatus{Placements: []api.PlacementStatus{{RuntimeID: "r1"}, {RuntimeID: "r2"}}}
	require.Equal(t, []api.FieldRef{
		{Field: "status.placements[0].runtime_id", Kind: api.KindKubernetesRuntime, ID: "r1"},
		{Field: "status.placements[1].runtime_id", Kind: api.KindKubernetesRuntime, ID: "r2"},
	}, sk.StatusRefs(st))
	f := &api.Failover{}
	require.True(t, f.On())
	off := false
	require.False(t, (&api.Failover{Enabled: &off}).On())
}
