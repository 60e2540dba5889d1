package awssim

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// state is every resource the stand-in holds. Keys are noted per map.
type state struct {
	roles        map[string]*iamRole       // account/name
	oidc         map[string]*oidcProvider  // arn
	vpcs         map[string]*vpc           // id
	subnets      map[string]*subnet        // id
	groups       map[string]*securityGroup // id
	clusters     map[string]*eksCluster    // account/region/name
	dbs          map[string]*dbInstance    // account/region/identifier
	subnetGroups map[string]*dbSubnetGroup // account/region/name
	buckets      map[string]*bucket        // name (global)
	zones        map[string]*hostedZone    // id
}

func newState() *state {
	return &state{
		roles: map[string]*iamRole{}, oidc: map[string]*oidcProvider{}, vpcs: map[string]*vpc{}, subnets: map[string]*subnet{},
		groups:   map[string]*securityGroup{},
		clusters: map[string]*eksCluster{}, dbs: map[string]*dbInstance{}, subnetGroups: map[string]*dbSubnetGroup{},
		buckets: map[string]*bucket{}, zones: map[string]*hostedZone{},
	}
}

// Resource is one thing that exists in the stand-in now.
type Resource struct {
	// Service is the SigV4 service name that owns it.
	Service string `json:"service"`
	// Type is its kind: role, oidc-provider, vpc, subnet, security-group, cluster, nodegroup,
	// db-instance, db-subnet-group, bucket, hosted-zone.
	Type string `json:"type"`
	// ID is its name, ID or ARN.
	ID string `json:"id"`
	// Account is the owning account ID.
	Account string `json:"account"`
	// Region is its region; empty for global resources.
	Region string `json:"region,omitempty"`
	// State is its lifecycle state where it has one (e.g. CREATING, available).
	State string `json:"state,omitempty"`
	// Tags are its tags.
	Tags map[string]string `json:"tags,omitempty"`
}

// Resources lists what exists now, sorted by service, type and ID. After a
// clean teardown it holds nothing but what the test made outside QleetOS.
func (s *Sim) Resources() []Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked()
	st := s.state
	out := []Resource{}
	for _, r := range st.roles {
		out = append(out, Resource{"iam", "role", r.Name, r.account, "", "", r.Tags.m})
	}
	for _, p := range st.oidc {
		out = append(out, Resource{"iam", "oidc-provider", p.ARN, p.account, "", "", p.Tags.m})
	}
	for _, v := range st.vpcs {
		out = append(out, Resource{"ec2", "vpc", v.ID, v.account, v.region, "available", v.Tags.m})
	}
	for _, n := range st.subnets {
		out = append(out, Resource{"ec2", "subnet", n.ID, n.account, n.region, "available", n.Tags.m})
	}
	for _, g := range st.groups {
		out = append(out, Resource{"ec2", "security-group", g.ID, g.account, g.region, "", g.Tags.m})
	}
	for _, c := range st.clusters {
		out = append(out, Resource{"eks", "cluster", c.Name, c.account, c.region, c.Status, c.Tags})
		for _, g := range c.nodegroups {
			out = append(out, Resource{"eks", "nodegroup", c.Name + "/" + g.NodegroupName, c.account, c.region, g.Status, g.Tags})
		}
	}
	for _, d := range st.dbs {
		out = append(out, Resource{"rds", "db-instance", d.Identifier, d.account, d.region, d.Status, d.Tags.m})
	}
	for _, g := range st.subnetGroups {
		out = append(out, Resource{"rds", "db-subnet-group", g.Name, g.account, g.region, "Complete", g.Tags.m})
	}
	for _, b := range st.buckets {
		out = append(out, Resource{"s3", "bucket", b.Name, b.account, b.region, "", b.tags})
	}
	for _, z := range st.zones {
		out = append(out, Resource{"route53", "hosted-zone", z.ID, z.account, "", "", z.tags})
	}
	slices.SortFunc(out, func(a, b Resource) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Type, b.Type), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// advanceLocked moves the asynchronous lifecycles along: EKS clusters and
// node groups, and RDS instances.
func (s *Sim) advanceLocked() {
	now := s.now()
	s.advanceEKSLocked(now)
	s.advanceRDSLocked(now)
}

// due reports whether a transition planned at t has come.
func due(now, t time.Time) bool { return !now.Before(t) }

// tagMap is a tag set that keeps insertion independent of order.
type tagMap struct{ m map[string]string }

func (t *tagMap) set(k, v string) {
	if t.m == nil {
		t.m = map[string]string{}
	}
	t.m[k] = v
}

func (t *tagMap) sorted() []string { return slices.Sorted(maps.Keys(t.m)) }
