package api

import (
	"fmt"
	"slices"
	"time"
)

// KindRuntimeProfile is the kind of operator-defined defaults for clusters provisioned on demand.
const KindRuntimeProfile = "runtime_profile"

// RuntimeProfileSpec says how QleetOS provisions a cluster on demand, in the regions it serves, when an
// instance's placement needs a runtime where none matches. Overlapping profiles (a region in common and
// labels that a selector could match together) must differ in priority, so that the choice is never random.
type RuntimeProfileSpec struct {
	// Provider of the clusters it provisions: "local" (kubesim) or "eks" (through AWS, with CloudAccountID).
	Provider string `json:"provider"`
	// CloudAccountID is the cloud_account that "eks" clusters are provisioned with.
	CloudAccountID string `json:"cloud_account_id,omitempty"`
	// NodeType is the EC2 instance type of "eks" clusters' node groups (default t3.medium).
	NodeType string `json:"node_type,omitempty"`
	// Regions it may provision in.
	Regions []string `json:"regions"`
	// Nodes is the initial node count (default 3, or min_nodes when larger).
	Nodes int `json:"nodes,omitempty"`
	// MinNodes and MaxNodes, when MaxNodes is set, let the runtime's node count follow demand.
	MinNodes int `json:"min_nodes,omitempty"`
	// MaxNodes is the upper node bound; 0 turns node autoscaling off.
	MaxNodes int `json:"max_nodes,omitempty"`
	// KubernetesVersion is the version the clusters run, e.g. "v1.31" (local clusters run kubesim's).
	KubernetesVersion string `json:"kubernetes_version,omitempty"`
	// RuntimeLabels are given to every runtime it provisions; placements' runtime_selector matches them.
	RuntimeLabels map[string]string `json:"runtime_labels,omitempty"`
	// Priority orders overlapping profiles: the highest wins.
	Priority int `json:"priority,omitempty"`
	// ReclaimAfter, a duration such as "30m", removes a runtime it provisioned once nothing has been
	// placed on it for that long. Empty: never.
	ReclaimAfter string `json:"reclaim_after,omitempty"`
}

// RuntimeProfileStatus is the observed state of a profile.
type RuntimeProfileStatus struct {
	Status
	// Runtimes counts the runtimes provisioned from the profile that exist now.
	Runtimes int `json:"runtimes"`
}

// RuntimeProfile is an operator-defined recipe for clusters provisioned on demand.
type RuntimeProfile = Object[RuntimeProfileSpec, RuntimeProfileStatus]

// Labels that QleetOS puts on the runtimes it provisions from a profile.
const (
	// LabelProfile names the profile a runtime was provisioned from.
	LabelProfile = "qleet.io/profile"
	// LabelProvisionedFor names the workload instance whose placement first asked for the runtime.
	LabelProvisionedFor = "qleet.io/provisioned-for"
	// LabelRegion is the region a provisioned runtime serves.
	LabelRegion = "qleet.io/region"
)

// Placement spreads values.
const (
	// SpreadRegion places one copy per region (default).
	SpreadRegion = "region"
	// SpreadRuntimes places on Runtimes runtimes in all, spread over the regions round-robin.
	SpreadRuntimes = "runtimes"
	// ReplicasDuplicated gives every placement the instance's full replica count (default).
	ReplicasDuplicated = "duplicated"
	// ReplicasWeighted splits the instance's replicas over regions by weight.
	ReplicasWeighted = "weighted"
	// DefaultFailoverToleration is how long a placed runtime may be unreachable before its replicas move.
	DefaultFailoverToleration = 60
)

// Placement says where an instance runs when it does not pin a runtime: in which regions, on which
// runtimes, how many copies and how replicas are split. Where no matching runtime exists, one is
// provisioned from the best matching runtime_profile.
type Placement struct {
	// Regions the instance runs in.
	Regions []string `json:"regions"`
	// RuntimeSelector keeps only runtimes (and profiles) carrying all these labels.
	RuntimeSelector map[string]string `json:"runtime_selector,omitempty"`
	// Spread is "region" (one runtime per region, default) or "runtimes" (Runtimes runtimes in all).
	Spread string `json:"spread,omitempty"`
	// Runtimes is the number of runtimes with spread "runtimes"; at least the number of regions.
	Runtimes int `json:"runtimes,omitempty"`
	// Replicas says how the instance's replicas are split (default: every placement gets them all).
	Replicas *PlacementReplicas `json:"replicas,omitempty"`
	// Failover moves a placement off a runtime unreachable for longer than its toleration (default on, 60 s).
	Failover *Failover `json:"failover,omitempty"`
}

// PlacementReplicas says how an instance's replicas are split over its placements.
type PlacementReplicas struct {
	// Mode is "duplicated" (each placement runs all replicas) or "weighted".
	Mode string `json:"mode"`
	// Weights per region, with mode "weighted": each region gets a share of the replicas in proportion.
	Weights map[string]int `json:"weights,omitempty"`
}

// Failover configures moving replicas off an unreachable runtime.
type Failover struct {
	// Enabled turns failover on (default true).
	Enabled *bool `json:"enabled,omitempty"`
	// TolerationSeconds is how long a runtime may be unreachable before its replicas move (default 60).
	TolerationSeconds int `json:"toleration_seconds,omitempty"`
}

// On reports whether failover is enabled (nil means the default, on).
func (f *Failover) On() bool { return f == nil || f.Enabled == nil || *f.Enabled }

// Toleration returns the failover toleration (default 60 s).
func (f *Failover) Toleration() time.Duration {
	if f == nil || f.TolerationSeconds <= 0 {
		return DefaultFailoverToleration * time.Second
	}
	return time.Duration(f.TolerationSeconds) * time.Second
}

// PlacementStatus is one runtime an instance is placed on, and how it does there.
type PlacementStatus struct {
	// RuntimeID is the runtime.
	RuntimeID string `json:"runtime_id"`
	// Runtime is the runtime's name.
	Runtime string `json:"runtime"`
	// Region is the runtime's region.
	Region string `json:"region,omitempty"`
	// Replicas is the desired replica count there.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas counts ready pods there.
	ReadyReplicas int32 `json:"ready_replicas"`
	// AvailableReplicas counts available pods there.
	AvailableReplicas int32 `json:"available_replicas"`
	// Phase is Pending (waiting for the runtime), Reconciling, Ready, Failed or Deleting (being moved off).
	Phase Phase `json:"phase"`
	// Message explains a phase that is not Ready.
	Message string `json:"message,omitempty"`
	// Profile names the runtime_profile the runtime was provisioned from for this placement, if any.
	Profile string `json:"profile,omitempty"`
	// Consumers are the instances that use this one with placement with_consumers and run on this
	// runtime: they brought it here. A placement that only they asked for goes when the last one leaves.
	Consumers []ObjectRef `json:"consumers,omitempty" ref:"workload_instance,usedby"`
	// Objects are the Kubernetes objects applied there.
	Objects []AppliedObject `json:"objects,omitempty"`
}

func defaultRuntimeProfile(s *RuntimeProfileSpec) {
	if s.Nodes == 0 {
		s.Nodes = max(defaultLocalNodes, s.MinNodes)
		if s.MaxNodes > 0 {
			s.Nodes = min(s.Nodes, s.MaxNodes)
		}
	}
}

func validateRuntimeProfile(s *RuntimeProfileSpec) []FieldError {
	var fe fieldErrors
	switch s.Provider {
	case ProviderLocal, ProviderEKS:
	case "":
		fe.add("spec.provider", "is required (local or eks)")
	default:
		fe.add("spec.provider", "must be local or eks, not %q", s.Provider)
	}
	validateRegions(&fe, "spec.regions", s.Regions)
	if s.Provider == ProviderEKS {
		for i, r := range s.Regions {
			if !awsRegionRE.MatchString(r) {
				fe.add(fmt.Sprintf("spec.regions[%d]", i), "must be an AWS region such as us-east-1 with provider eks, not %q", r)
			}
		}
	}
	validateEKSFields(&fe, s.Provider, s.CloudAccountID, s.NodeType, nil)
	if s.Nodes < 1 || s.Nodes > 100 {
		fe.add("spec.nodes", "must be between 1 and 100, not %d", s.Nodes)
	}
	validateNodeBounds(&fe, s.Nodes, s.MinNodes, s.MaxNodes)
	if v := s.KubernetesVersion; v != "" && !kubeVersionRE.MatchString(v) {
		fe.add("spec.kubernetes_version", "must look like v1.31 or v1.31.4, not %q", v)
	}
	for _, e := range ValidateMeta("x", s.RuntimeLabels) {
		fe.add("spec.runtime_"+e.Field, "%s", e.Message)
	}
	if s.ReclaimAfter != "" {
		if d, err := time.ParseDuration(s.ReclaimAfter); err != nil || d <= 0 {
			fe.add("spec.reclaim_after", "must be a positive duration such as \"30m\", not %q", s.ReclaimAfter)
		}
	}
	return fe
}

// validateNodeBounds checks min and max nodes against each other and the node count.
func validateNodeBounds(fe *fieldErrors, nodes, minNodes, maxNodes int) {
	if minNodes < 0 {
		fe.add("spec.min_nodes", "must not be negative")
	}
	if maxNodes < 0 || maxNodes > 100 {
		fe.add("spec.max_nodes", "must be between 0 and 100, not %d", maxNodes)
	}
	if maxNodes > 0 && minNodes > maxNodes {
		fe.add("spec.min_nodes", "must not exceed max_nodes (%d > %d)", minNodes, maxNodes)
	}
	if maxNodes > 0 && nodes > 0 && (nodes < minNodes || nodes > maxNodes) {
		fe.add("spec.nodes", "must be between min_nodes and max_nodes (%d-%d), not %d", minNodes, maxNodes, nodes)
	}
}

func validateRegions(fe *fieldErrors, path string, regions []string) {
	if len(regions) == 0 {
		fe.add(path, "needs at least one region")
	}
	if len(regions) > 32 {
		fe.add(path, "at most 32 regions are allowed (got %d)", len(regions))
		return
	}
	seen := map[string]bool{}
	for i, r := range regions {
		p := fmt.Sprintf("%s[%d]", path, i)
		if seen[r] {
			fe.add(p, "duplicate region %q", r)
		}
		seen[r] = true
		fe.msgs(p, isDNS1123Label(r))
	}
}

// ProfilesOverlap reports whether two profiles could both serve one placement: a region in common, and
// no label key they give different values.
func ProfilesOverlap(a, b *RuntimeProfileSpec) (region string, ok bool) {
	for k, v := range a.RuntimeLabels {
		if w, has := b.RuntimeLabels[k]; has && w != v {
			return "", false
		}
	}
	for _, r := range a.Regions {
		if slices.Contains(b.Regions, r) {
			return r, true
		}
	}
	return "", false
}

// validateRuntimeProfilePeers rejects a profile that overlaps another of equal priority.
func validateRuntimeProfilePeers(s *RuntimeProfileSpec, peers []Peer[RuntimeProfileSpec]) []FieldError {
	var fe fieldErrors
	for _, p := range peers {
		if p.Spec.Priority != s.Priority {
			continue
		}
		if region, ok := ProfilesOverlap(s, p.Spec); ok {
			fe.add("spec.priority", "runtime_profile %q also serves region %q with labels that do not conflict, at the same priority %d; "+
				"give one of them a different priority so that the choice is never random", p.Name, region, s.Priority)
		}
	}
	return fe
}

func validatePlacement(fe *fieldErrors, p *Placement) {
	validateRegions(fe, "spec.placement.regions", p.Regions)
	for _, e := range ValidateMeta("x", p.RuntimeSelector) {
		fe.add("spec.placement.runtime_selector"+e.Field[len("labels"):], "%s", e.Message)
	}
	switch p.Spread {
	case "", SpreadRegion:
		if p.Runtimes != 0 {
			fe.add("spec.placement.runtimes", "is only valid with spread %q", SpreadRuntimes)
		}
	case SpreadRuntimes:
		if p.Runtimes < len(p.Regions) || p.Runtimes > 64 {
			fe.add("spec.placement.runtimes", "must be between the number of regions (%d) and 64 with spread %q, not %d", len(p.Regions), SpreadRuntimes, p.Runtimes)
		}
	default:
		fe.add("spec.placement.spread", "must be %q or %q, not %q", SpreadRegion, SpreadRuntimes, p.Spread)
	}
	if r := p.Replicas; r != nil {
		switch r.Mode {
		case "", ReplicasDuplicated:
			if len(r.Weights) > 0 {
				fe.add("spec.placement.replicas.weights", "are only valid with mode %q", ReplicasWeighted)
			}
		case ReplicasWeighted:
			for _, region := range p.Regions {
				if r.Weights[region] <= 0 {
					fe.add(fmt.Sprintf("spec.placement.replicas.weights[%q]", region), "needs a positive weight for every placement region")
				}
			}
			for _, k := range sortedKeys(intKeys(r.Weights)) {
				if !slices.Contains(p.Regions, k) {
					fe.add(fmt.Sprintf("spec.placement.replicas.weights[%q]", k), "names a region not in spec.placement.regions")
				}
			}
		default:
			fe.add("spec.placement.replicas.mode", "must be %q or %q, not %q", ReplicasDuplicated, ReplicasWeighted, r.Mode)
		}
	}
	if f := p.Failover; f != nil && (f.TolerationSeconds < 0 || f.TolerationSeconds > 86400) {
		fe.add("spec.placement.failover.toleration_seconds", "must be between 0 and 86400, not %d", f.TolerationSeconds)
	}
}

func intKeys(m map[string]int) map[string]string {
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = ""
	}
	return out
}

// workloadInstanceStatusRefs are the runtimes an instance is placed on: edges of the dependency graph
// that the controller decides, so that a runtime in use is not deleted, and its readiness wakes the instance.
func workloadInstanceStatusRefs(s *WorkloadInstanceStatus) []FieldRef {
	var refs []FieldRef
	for i, p := range s.Placements {
		// A placement being moved off (Deleting) does not hold its runtime: deleting a dead runtime
		// must not need the instance's consent.
		if p.RuntimeID != "" && p.Phase != PhaseDeleting {
			refs = append(refs, FieldRef{Field: fmt.Sprintf("status.placements[%d].runtime_id", i), Kind: KindKubernetesRuntime, ID: p.RuntimeID})
		}
	}
	return refs
}

func init() {
	RegisterKind(KindDef[RuntimeProfileSpec, RuntimeProfileStatus]{
		Kind:          KindRuntimeProfile,
		Title:         "runtime profile",
		ShortNames:    []string{"profile"},
		Description:   "An operator-defined recipe for Kubernetes clusters provisioned on demand: when a workload instance's `placement` needs a runtime in a region where none matches, QleetOS provisions one from the matching profile of highest priority. The runtime is owned by the profile, labelled `qleet.io/profile`, and reclaimed once idle for `reclaim_after` if set. Profiles that could serve the same placement (a region in common, labels that do not conflict) must differ in priority.",
		Default:       defaultRuntimeProfile,
		Validate:      validateRuntimeProfile,
		Refs:          runtimeProfileRefs,
		ValidatePeers: validateRuntimeProfilePeers,
	})
}
