package placement_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/placement"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func profile(name string, prio int, labels map[string]string, regions ...string) placement.Profile {
	return placement.Profile{ID: "p-" + name, Name: name, Spec: api.RuntimeProfileSpec{Provider: "local", Regions: regions, Priority: prio, RuntimeLabels: labels}}
}

// summary renders targets as "region:runtime-or-provision=replicas".
func summary(ts []placement.Target) []string {
	var out []string
	for _, t := range ts {
		where := ""
		switch {
		case t.Runtime != nil:
			where = t.Runtime.Name
		case t.Provision != nil:
			where = "new " + t.Provision.Name + " from " + t.Provision.Profile.Name
		default:
			where = "none"
		}
		out = append(out, t.Region+":"+where+"="+itoa(t.Replicas))
	}
	return out
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func TestDecide(t *testing.T) {
	t.Parallel()
	two := &api.Placement{Regions: []string{"eu-west", "us-east"}}
	t.Run("no runtime anywhere: provision one per region from the profile", func(t *testing.T) {
		got := placement.Decide(placement.Input{Placement: two, Replicas: 2, Profiles: []placement.Profile{profile("default", 0, nil, "eu-west", "us-east")}, Now: now})
		require.Equal(t, []string{"eu-west:new default-eu-west from default=2", "us-east:new default-us-east from default=2"}, summary(got))
	})
	t.Run("a Ready matching runtime is preferred; names never collide", func(t *testing.T) {
		rts := []placement.Runtime{
			{ID: "1", Name: "eu-1", Region: "eu-west", Ready: true},
			{ID: "2", Name: "default-us-east", Region: "us-west", Ready: true},
		}
		got := placement.Decide(placement.Input{Placement: two, Replicas: 1, Runtimes: rts, Profiles: []placement.Profile{profile("default", 0, nil, "eu-west", "us-east")}, Now: now})
		require.Equal(t, []string{"eu-west:eu-1=1", "us-east:new default-us-east-2 from default=1"}, summary(got))
	})
	t.Run("the selector filters runtimes and profiles; the highest priority wins", func(t *testing.T) {
		p := &api.Placement{Regions: []string{"eu-west"}, RuntimeSelector: map[string]string{"tier": "gold"}}
		rts := []placement.Runtime{{ID: "1", Name: "plain", Region: "eu-west", Ready: true}}
		profs := []placement.Profile{profile("default", 0, nil, "eu-west"), profile("gold", 1, map[string]string{"tier": "gold"}, "eu-west"), profile("gold2", 5, map[string]string{"tier": "gold"}, "eu-west")}
		require.Equal(t, []string{"eu-west:new gold2-eu-west from gold2=1"}, summary(placement.Decide(placement.Input{Placement: p, Replicas: 1, Runtimes: rts, Profiles: profs, Now: now})))
		got := placement.Decide(placement.Input{Placement: p, Replicas: 1, Runtimes: rts, Profiles: profs[:1], Now: now})
		require.Equal(t, "no runtime in region \"eu-west\" matches the selector tier=gold, and no runtime_profile serves that region with those labels", got[0].Problem)
	})
	t.Run("a runtime being provisioned from a profile is reused, not provisioned twice", func(t *testing.T) {
		rts := []placement.Runtime{{ID: "1", Name: "default-eu-west", Region: "eu-west", Profile: "default"}}
		got := placement.Decide(placement.Input{Placement: &api.Placement{Regions: []string{"eu-west"}}, Replicas: 1, Runtimes: rts, Profiles: []placement.Profile{profile("default", 0, nil, "eu-west")}, Now: now})
		require.Equal(t, []string{"eu-west:default-eu-west=1"}, summary(got))
	})
	t.Run("sticky: a current placement stays though a better-named runtime is Ready", func(t *testing.T) {
		rts := []placement.Runtime{{ID: "1", Name: "a", Region: "eu-west", Ready: true}, {ID: "2", Name: "b", Region: "eu-west", Ready: true}}
		got := placement.Decide(placement.Input{Placement: &api.Placement{Regions: []string{"eu-west"}}, Replicas: 1, Runtimes: rts, Current: []api.PlacementStatus{{RuntimeID: "2"}}, Now: now})
		require.Equal(t, []string{"eu-west:b=1"}, summary(got))
	})
	t.Run("failover after the toleration, not before; never with failover off", func(t *testing.T) {
		rts := []placement.Runtime{
			{ID: "1", Name: "a", Region: "eu-west", UnreachableSince: now.Add(-30 * time.Second)},
			{ID: "2", Name: "b", Region: "eu-west", Ready: true},
		}
		cur := []api.PlacementStatus{{RuntimeID: "1"}}
		p := &api.Placement{Regions: []string{"eu-west"}}
		require.Equal(t, []string{"eu-west:a=1"}, summary(placement.Decide(placement.Input{Placement: p, Replicas: 1, Runtimes: rts, Current: cur, Now: now})), "within the 60 s default")
		p.Failover = &api.Failover{TolerationSeconds: 10}
		got := placement.Decide(placement.Input{Placement: p, Replicas: 1, Runtimes: rts, Current: cur, Now: now})
		require.Equal(t, []string{"eu-west:b=1"}, summary(got))
		require.Equal(t, "a", got[0].Replaces)
		off := false
		p.Failover.Enabled = &off
		require.Equal(t, []string{"eu-west:a=1"}, summary(placement.Decide(placement.Input{Placement: p, Replicas: 1, Runtimes: rts, Current: cur, Now: now})))
		// With no other runtime, the failover provisions one.
		p.Failover.Enabled = nil
		got = placement.Decide(placement.Input{Placement: p, Replicas: 1, Runtimes: rts[:1], Current: cur, Profiles: []placement.Profile{profile("default", 0, nil, "eu-west")}, Now: now})
		require.Equal(t, []string{"eu-west:new default-eu-west from default=1"}, summary(got))
		require.Equal(t, "a", got[0].Replaces)
	})
	t.Run("deleting, failed and other-region runtimes are never chosen", func(t *testing.T) {
		rts := []placement.Runtime{
			{ID: "1", Name: "del", Region: "eu-west", Ready: true, Deleting: true},
			{ID: "2", Name: "bad", Region: "eu-west", Failed: true},
			{ID: "3", Name: "far", Region: "us-east", Ready: true},
		}
		got := placement.Decide(placement.Input{Placement: &api.Placement{Regions: []string{"eu-west"}}, Replicas: 1, Runtimes: rts, Current: []api.PlacementStatus{{RuntimeID: "1"}}, Now: now})
		require.Equal(t, []string{"eu-west:none=1"}, summary(got))
	})
	t.Run("spread over N runtimes, weighted replicas", func(t *testing.T) {
		p := &api.Placement{Regions: []string{"eu-west", "us-east"}, Spread: api.SpreadRuntimes, Runtimes: 3,
			Replicas: &api.PlacementReplicas{Mode: api.ReplicasWeighted, Weights: map[string]int{"eu-west": 3, "us-east": 1}}}
		got := placement.Decide(placement.Input{Placement: p, Replicas: 10, Profiles: []placement.Profile{profile("default", 0, nil, "eu-west", "us-east")}, Now: now})
		require.Equal(t, []string{"eu-west:new default-eu-west from default=4", "eu-west:new default-eu-west-2 from default=4", "us-east:new default-us-east from default=2"}, summary(got))
	})
}

func TestWeighted(t *testing.T) {
	t.Parallel()
	regions := []string{"a", "b", "c"}
	for _, tc := range []struct {
		total   int32
		weights map[string]int
		want    map[string]int32
	}{
		{6, map[string]int{"a": 1, "b": 1, "c": 1}, map[string]int32{"a": 2, "b": 2, "c": 2}},
		{10, map[string]int{"a": 3, "b": 1, "c": 1}, map[string]int32{"a": 6, "b": 2, "c": 2}},
		{4, map[string]int{"a": 1, "b": 1, "c": 1}, map[string]int32{"a": 2, "b": 1, "c": 1}},
		{1, map[string]int{"a": 1, "b": 5, "c": 1}, map[string]int32{"a": 0, "b": 1, "c": 0}},
		{0, map[string]int{"a": 1, "b": 1, "c": 1}, map[string]int32{"a": 0, "b": 0, "c": 0}},
	} {
		got := placement.Weighted(tc.total, regions, tc.weights)
		require.Equal(t, tc.want, got, "total %d weights %v", tc.total, tc.weights)
	}
}
