// Package placement decides where a workload instance runs: which runtimes in which regions, with how
// many replicas each, and where a runtime must first be provisioned from a runtime_profile. Decide is a
// pure function of the instance's placement, the runtimes, the profiles and the current placements, so
// that the instance controller stays short and every rule here is tested without clusters.
package placement

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// Runtime is what a decision needs to know about one kubernetes_runtime.
type Runtime struct {
	// ID and Name identify the runtime.
	ID, Name string
	// Region is the runtime's region (its spec's, else the one its nodes report).
	Region string
	// Labels are the runtime's labels, matched by the placement's runtime_selector.
	Labels map[string]string
	// Ready says the runtime is reconciled.
	Ready bool
	// Failed says the runtime failed at its generation; nothing is placed there.
	Failed bool
	// Deleting says the runtime's deletion was requested.
	Deleting bool
	// UnreachableSince is when its Kubernetes API stopped answering; zero while it answers.
	UnreachableSince time.Time
	// Profile names the profile it was provisioned from, if any.
	Profile string
}

// FromObject summarises a runtime object for Decide.
func FromObject(rt *api.KubernetesRuntime) Runtime {
	r := Runtime{
		ID: rt.ID, Name: rt.Name, Region: rt.Spec.Region, Labels: rt.Labels,
		Ready:    api.Reconciled(rt.Generation, &rt.Status.Status),
		Failed:   rt.Status.Phase == api.PhaseFailed && rt.Status.ObservedGeneration == rt.Generation,
		Deleting: rt.DeletionRequestedAt != nil,
		Profile:  rt.Labels[api.LabelProfile],
	}
	if r.Region == "" {
		r.Region = rt.Status.Region
	}
	for _, c := range rt.Status.Conditions {
		if c.Type == "Connected" && c.Status == api.ConditionFalse {
			r.UnreachableSince = c.LastTransitionTime
		}
	}
	return r
}

// Profile is a runtime_profile that may provision runtimes.
type Profile struct {
	// ID and Name identify the profile.
	ID, Name string
	// Spec is the profile's spec.
	Spec api.RuntimeProfileSpec
}

// Input is everything a decision depends on.
type Input struct {
	// Placement is the instance's spec.placement.
	Placement *api.Placement
	// Replicas is the instance's replica count.
	Replicas int32
	// Runtimes are all runtimes.
	Runtimes []Runtime
	// Profiles are all runtime profiles.
	Profiles []Profile
	// Current are the instance's placements now (its status).
	Current []api.PlacementStatus
	// Now is the decision's time.
	Now time.Time
}

// Target is one placement the instance should have.
type Target struct {
	// Region the placement serves.
	Region string
	// Runtime is the runtime to run on; empty when Provision or Problem is set.
	Runtime *Runtime
	// Provision, when set, says that a runtime must first be provisioned.
	Provision *Provision
	// Problem says why the region has no runtime and none can be provisioned.
	Problem string
	// Replicas is the replica count there.
	Replicas int32
	// Replaces names the unreachable runtime this placement fails over from.
	Replaces string
}

// Provision asks for a new runtime from a profile.
type Provision struct {
	// Profile is the profile to provision from.
	Profile Profile
	// Name is a free runtime name: "<profile>-<region>", then "-2", "-3", ...
	Name string
	// Region is the region to provision in.
	Region string
}

// Decide returns the placements an instance should have, in region order. It keeps current placements
// on healthy runtimes (a decision is sticky: it never moves replicas for a better-looking runtime), then
// prefers Ready matching runtimes, then runtimes still being provisioned from a profile (another
// instance may have asked for them), then provisions from the matching profile of highest priority. A
// runtime unreachable for longer than the failover toleration is dropped, when failover is on, and its
// replacement says so.
func Decide(in Input) []Target {
	p := in.Placement
	slots := slotsPerRegion(p)
	byID := map[string]*Runtime{}
	for i := range in.Runtimes {
		byID[in.Runtimes[i].ID] = &in.Runtimes[i]
	}
	names := map[string]bool{}
	for _, rt := range in.Runtimes {
		names[rt.Name] = true
	}
	used := map[string]bool{}
	var out []Target
	for _, region := range p.Regions {
		var targets []Target
		var lost []string
		// 1. Current placements on runtimes that still match and are healthy.
		for _, c := range in.Current {
			rt := byID[c.RuntimeID]
			if rt == nil || used[rt.ID] || !matches(rt, region, p) || len(targets) >= slots[region] {
				continue
			}
			if gone(rt, p, in.Now) {
				lost = append(lost, rt.Name)
				continue
			}
			used[rt.ID] = true
			targets = append(targets, Target{Region: region, Runtime: rt})
		}
		// 2 and 3. Ready matching runtimes, reachable first; then ones being provisioned from a profile.
		candidates := candidatesIn(in.Runtimes, region, p, in.Now)
		for _, rt := range candidates {
			if len(targets) >= slots[region] {
				break
			}
			if !used[rt.ID] {
				used[rt.ID] = true
				targets = append(targets, Target{Region: region, Runtime: rt})
			}
		}
		// 4. Provision the rest.
		for len(targets) < slots[region] {
			prof, problem := bestProfile(in.Profiles, region, p)
			if prof == nil {
				targets = append(targets, Target{Region: region, Problem: problem})
				continue
			}
			name := freeName(names, prof.Name+"-"+region)
			names[name] = true
			targets = append(targets, Target{Region: region, Provision: &Provision{Profile: *prof, Name: name, Region: region}})
		}
		for i, j := 0, 0; i < len(targets) && j < len(lost); i++ {
			if targets[i].Runtime == nil || !isCurrent(in.Current, targets[i].Runtime.ID) {
				targets[i].Replaces = lost[j]
				j++
			}
		}
		out = append(out, targets...)
	}
	splitReplicas(out, p, in.Replicas)
	return out
}

// slotsPerRegion is how many runtimes each region gets: one, or Runtimes spread round-robin.
func slotsPerRegion(p *api.Placement) map[string]int {
	slots := map[string]int{}
	if p.Spread != api.SpreadRuntimes {
		for _, r := range p.Regions {
			slots[r] = 1
		}
		return slots
	}
	for i := range max(p.Runtimes, len(p.Regions)) {
		slots[p.Regions[i%len(p.Regions)]]++
	}
	return slots
}

// matches reports whether a runtime may hold a placement in region: same region, the selector's labels,
// not being deleted, not Failed.
func matches(rt *Runtime, region string, p *api.Placement) bool {
	if rt.Region != region || rt.Deleting || rt.Failed {
		return false
	}
	for k, v := range p.RuntimeSelector {
		if rt.Labels[k] != v {
			return false
		}
	}
	return true
}

// gone reports whether a runtime has been unreachable for longer than the failover toleration.
func gone(rt *Runtime, p *api.Placement, now time.Time) bool {
	return p.Failover.On() && !rt.UnreachableSince.IsZero() && now.Sub(rt.UnreachableSince) > p.Failover.Toleration()
}

func candidatesIn(all []Runtime, region string, p *api.Placement, now time.Time) []*Runtime {
	var ready, provisioning []*Runtime
	for i := range all {
		rt := &all[i]
		if !matches(rt, region, p) || gone(rt, p, now) {
			continue
		}
		switch {
		case rt.Ready:
			ready = append(ready, rt)
		case rt.Profile != "" && rt.UnreachableSince.IsZero():
			provisioning = append(provisioning, rt)
		}
	}
	sort.SliceStable(ready, func(i, j int) bool {
		ri, rj := ready[i].UnreachableSince.IsZero(), ready[j].UnreachableSince.IsZero()
		if ri != rj {
			return ri
		}
		return ready[i].Name < ready[j].Name
	})
	sort.SliceStable(provisioning, func(i, j int) bool { return provisioning[i].Name < provisioning[j].Name })
	return append(ready, provisioning...)
}

// bestProfile returns the profile of highest priority that serves region with labels satisfying the
// selector, or why there is none.
func bestProfile(profiles []Profile, region string, p *api.Placement) (*Profile, string) {
	var best *Profile
	for i := range profiles {
		pr := &profiles[i]
		if !slices.Contains(pr.Spec.Regions, region) || pr.Spec.Provider != api.ProviderLocal && pr.Spec.Provider != api.ProviderEKS {
			continue
		}
		ok := true
		for k, v := range p.RuntimeSelector {
			if pr.Spec.RuntimeLabels[k] != v {
				ok = false
			}
		}
		if ok && (best == nil || pr.Spec.Priority > best.Spec.Priority || pr.Spec.Priority == best.Spec.Priority && pr.Name < best.Name) {
			best = pr
		}
	}
	if best != nil {
		return best, ""
	}
	msg := fmt.Sprintf("no runtime in region %q matches, and no runtime_profile serves that region", region)
	if len(p.RuntimeSelector) > 0 {
		msg = fmt.Sprintf("no runtime in region %q matches the selector %s, and no runtime_profile serves that region with those labels", region, selector(p.RuntimeSelector))
	}
	return nil, msg
}

func selector(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func freeName(taken map[string]bool, base string) string {
	if len(base) > 55 {
		base = strings.TrimRight(base[:55], "-")
	}
	if !taken[base] {
		return base
	}
	for i := 2; ; i++ {
		if n := fmt.Sprintf("%s-%d", base, i); !taken[n] {
			return n
		}
	}
}

func isCurrent(current []api.PlacementStatus, id string) bool {
	for _, c := range current {
		if c.RuntimeID == id {
			return true
		}
	}
	return false
}

// splitReplicas gives every target the full count (duplicated), or splits it over regions by weight
// with the largest-remainder method and then evenly over a region's targets (weighted).
func splitReplicas(targets []Target, p *api.Placement, total int32) {
	if p.Replicas == nil || p.Replicas.Mode != api.ReplicasWeighted {
		for i := range targets {
			targets[i].Replicas = total
		}
		return
	}
	shares := Weighted(total, p.Regions, p.Replicas.Weights)
	perRegion := map[string][]int{}
	for i, t := range targets {
		perRegion[t.Region] = append(perRegion[t.Region], i)
	}
	for region, idx := range perRegion {
		share := shares[region]
		n := int32(len(idx))
		for k, i := range idx {
			targets[i].Replicas = share / n
			if int32(k) < share%n {
				targets[i].Replicas++
			}
		}
	}
}

// Weighted splits total over regions in proportion to their weights, by the largest-remainder method
// (ties to the earlier region), so that the shares always add up to total.
func Weighted(total int32, regions []string, weights map[string]int) map[string]int32 {
	sum := 0
	for _, r := range regions {
		sum += weights[r]
	}
	out := map[string]int32{}
	if sum == 0 {
		return out
	}
	type rem struct {
		region string
		frac   int
		order  int
	}
	var rems []rem
	given := int32(0)
	for i, r := range regions {
		q := int(total) * weights[r]
		out[r] = int32(q / sum)
		given += out[r]
		rems = append(rems, rem{r, q % sum, i})
	}
	sort.SliceStable(rems, func(i, j int) bool {
		if rems[i].frac != rems[j].frac {
			return rems[i].frac > rems[j].frac
		}
		return rems[i].order < rems[j].order
	})
	for i := 0; given < total; i++ {
		out[rems[i%len(rems)].region]++
		given++
	}
	return out
}
