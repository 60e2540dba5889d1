package awssim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// EKS statuses.
const (
	eksCreating = "CREATING"
	eksActive   = "ACTIVE"
	eksDeleting = "DELETING"
	eksFailed   = "FAILED"
	eksUpdating = "UPDATING"
)

type eksVpcConfig struct {
	SubnetIDs              []string `json:"subnetIds"`
	SecurityGroupIDs       []string `json:"securityGroupIds"`
	ClusterSecurityGroupID string   `json:"clusterSecurityGroupId,omitempty"`
	VpcID                  string   `json:"vpcId,omitempty"`
	EndpointPublicAccess   bool     `json:"endpointPublicAccess"`
	EndpointPrivateAccess  bool     `json:"endpointPrivateAccess"`
}

type eksCA struct {
	Data string `json:"data"`
}

type eksOIDC struct {
	Issuer string `json:"issuer"`
}

type eksIdentity struct {
	OIDC eksOIDC `json:"oidc"`
}

// eksCluster is a cluster as DescribeCluster shows it, plus what the
// stand-in keeps of it.
type eksCluster struct {
	Name                 string            `json:"name"`
	Arn                  string            `json:"arn"`
	CreatedAt            float64           `json:"createdAt"`
	Version              string            `json:"version"`
	Endpoint             string            `json:"endpoint,omitempty"`
	RoleArn              string            `json:"roleArn"`
	ResourcesVpcConfig   eksVpcConfig      `json:"resourcesVpcConfig"`
	Status               string            `json:"status"`
	CertificateAuthority *eksCA            `json:"certificateAuthority,omitempty"`
	PlatformVersion      string            `json:"platformVersion"`
	Tags                 map[string]string `json:"tags"`
	Identity             eksIdentity       `json:"identity"`
	Health               *eksHealth        `json:"health,omitempty"`

	account    string
	region     string
	readyAt    time.Time // CREATING until then (and until kube is ready)
	goneAt     time.Time // DELETING until then (and until kube has stopped)
	nodegroups map[string]*nodegroup
	kube       *kubeBackend // nil when Config.Kubesim is off and no endpoint is served
}

// eksHealth says why a cluster FAILED (its kubesim did not start).
type eksHealth struct {
	Issues []eksIssue `json:"issues"`
}

type eksIssue struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type scalingConfig struct {
	MinSize     *int32 `json:"minSize,omitempty"`
	MaxSize     *int32 `json:"maxSize,omitempty"`
	DesiredSize *int32 `json:"desiredSize,omitempty"`
}

type nodegroupHealth struct {
	Issues []any `json:"issues"`
}

type asg struct {
	Name string `json:"name"`
}

type nodegroupResources struct {
	AutoScalingGroups []asg `json:"autoScalingGroups"`
}

type nodegroup struct {
	NodegroupName  string             `json:"nodegroupName"`
	NodegroupArn   string             `json:"nodegroupArn"`
	ClusterName    string             `json:"clusterName"`
	Version        string             `json:"version"`
	ReleaseVersion string             `json:"releaseVersion"`
	CreatedAt      float64            `json:"createdAt"`
	ModifiedAt     float64            `json:"modifiedAt"`
	Status         string             `json:"status"`
	CapacityType   string             `json:"capacityType"`
	ScalingConfig  scalingConfig      `json:"scalingConfig"`
	InstanceTypes  []string           `json:"instanceTypes"`
	Subnets        []string           `json:"subnets"`
	AmiType        string             `json:"amiType"`
	NodeRole       string             `json:"nodeRole"`
	Labels         map[string]string  `json:"labels"`
	Resources      nodegroupResources `json:"resources"`
	DiskSize       int32              `json:"diskSize"`
	Health         nodegroupHealth    `json:"health"`
	Tags           map[string]string  `json:"tags"`

	readyAt time.Time // CREATING/UPDATING until then
	goneAt  time.Time // DELETING until then
}

type eksUpdate struct {
	ID        string           `json:"id"`
	Status    string           `json:"status"`
	Type      string           `json:"type"`
	Params    []eksUpdateParam `json:"params"`
	CreatedAt float64          `json:"createdAt"`
	Errors    []any            `json:"errors"`

	doneAt time.Time
}

type eksUpdateParam struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// eksVersion is the Kubernetes version EKS clusters report by default.
const eksVersion = "1.31"

func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func (s *Sim) routeEKS(q *request) (string, handler, *apiError) {
	var segs []string
	for _, p := range strings.Split(strings.Trim(q.r.URL.EscapedPath(), "/"), "/") {
		u, err := url.PathUnescape(p)
		if err != nil {
			return "Unknown", nil, errorf(http.StatusBadRequest, "InvalidRequestException", "bad path segment %q", p)
		}
		segs = append(segs, u)
	}
	m := q.r.Method
	n := len(segs)
	switch {
	case n == 1 && segs[0] == "clusters" && m == http.MethodPost:
		return "CreateCluster", s.createCluster, nil
	case n == 1 && segs[0] == "clusters" && m == http.MethodGet:
		return "ListClusters", s.listClusters, nil
	case n == 2 && segs[0] == "clusters" && m == http.MethodGet:
		return "DescribeCluster", s.eksClusterOp(segs[1], s.describeCluster), nil
	case n == 2 && segs[0] == "clusters" && m == http.MethodDelete:
		return "DeleteCluster", s.eksClusterOp(segs[1], s.deleteCluster), nil
	case n == 3 && segs[0] == "clusters" && segs[2] == "node-groups" && m == http.MethodPost:
		return "CreateNodegroup", s.eksClusterOp(segs[1], s.createNodegroup), nil
	case n == 3 && segs[0] == "clusters" && segs[2] == "node-groups" && m == http.MethodGet:
		return "ListNodegroups", s.eksClusterOp(segs[1], s.listNodegroups), nil
	case n == 4 && segs[0] == "clusters" && segs[2] == "node-groups" && m == http.MethodGet:
		return "DescribeNodegroup", s.eksNodegroupOp(segs[1], segs[3], s.describeNodegroup), nil
	case n == 4 && segs[0] == "clusters" && segs[2] == "node-groups" && m == http.MethodDelete:
		return "DeleteNodegroup", s.eksNodegroupOp(segs[1], segs[3], s.deleteNodegroup), nil
	case n == 5 && segs[0] == "clusters" && segs[2] == "node-groups" && segs[4] == "update-config" && m == http.MethodPost:
		return "UpdateNodegroupConfig", s.eksNodegroupOp(segs[1], segs[3], s.updateNodegroupConfig), nil
	case n == 4 && segs[0] == "clusters" && segs[2] == "updates" && m == http.MethodGet:
		return "DescribeUpdate", s.eksClusterOp(segs[1], func(q *request, c *eksCluster) (*reply, *apiError) {
			return s.describeUpdate(q, c, segs[3])
		}), nil
	case n >= 2 && segs[0] == "tags":
		arn := strings.Join(segs[1:], "/")
		switch m {
		case http.MethodPost:
			return "TagResource", func(q *request) (*reply, *apiError) { return s.eksTags(q, arn, "tag") }, nil
		case http.MethodDelete:
			return "UntagResource", func(q *request) (*reply, *apiError) { return s.eksTags(q, arn, "untag") }, nil
		case http.MethodGet:
			return "ListTagsForResource", func(q *request) (*reply, *apiError) { return s.eksTags(q, arn, "list") }, nil
		}
	}
	return "Unknown", nil, errorf(http.StatusNotFound, "UnknownOperationException", "The stand-in's EKS serves no %s %s", m, q.r.URL.Path)
}

func (s *Sim) clusterKey(q *request, name string) string {
	return q.account() + "/" + q.region + "/" + name
}

func noSuchCluster(name string) *apiError {
	return errorf(http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: %s.", name)
}

func (s *Sim) eksClusterOp(name string, h func(q *request, c *eksCluster) (*reply, *apiError)) handler {
	return func(q *request) (*reply, *apiError) {
		q.param("name", name)
		c := s.state.clusters[s.clusterKey(q, name)]
		if c == nil {
			return nil, noSuchCluster(name)
		}
		return h(q, c)
	}
}

func (s *Sim) eksNodegroupOp(cluster, name string, h func(q *request, c *eksCluster, g *nodegroup) (*reply, *apiError)) handler {
	return s.eksClusterOp(cluster, func(q *request, c *eksCluster) (*reply, *apiError) {
		q.param("nodegroupName", name)
		g := c.nodegroups[name]
		if g == nil {
			return nil, errorf(http.StatusNotFound, "ResourceNotFoundException", "No node group found for name: %s.", name)
		}
		return h(q, c, g)
	})
}

func badEKS(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, "InvalidParameterException", format, args...)
}

func decodeJSON(q *request, v any) *apiError {
	if len(q.body) == 0 {
		return nil
	}
	if err := json.Unmarshal(q.body, v); err != nil {
		return errorf(http.StatusBadRequest, "SerializationException", "cannot read the request body: %v", err)
	}
	return nil
}

// roleExistsLocked reports whether an IAM role ARN names a role of account.
func (s *Sim) roleExistsLocked(account, arn string) bool {
	m := roleARN.FindStringSubmatch(arn)
	if m == nil || m[1] != account {
		return false
	}
	r := s.state.roles[m[1]+"/"+m[2]]
	return r != nil && r.Arn == arn
}

func (s *Sim) createCluster(q *request) (*reply, *apiError) {
	var in struct {
		Name               string            `json:"name"`
		Version            string            `json:"version"`
		RoleArn            string            `json:"roleArn"`
		ResourcesVpcConfig eksVpcConfig      `json:"resourcesVpcConfig"`
		Tags               map[string]string `json:"tags"`
	}
	if e := decodeJSON(q, &in); e != nil {
		return nil, e
	}
	q.param("name", in.Name)
	if !matches(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`, in.Name) {
		return nil, badEKS("The cluster name %q is invalid: 1-100 characters, letters, digits, hyphens and underscores, starting with a letter or digit.", in.Name)
	}
	if !s.roleExistsLocked(q.account(), in.RoleArn) {
		return nil, badEKS("Role with arn: %s, could not be assumed because it does not exist or the trusted entity is not correct", in.RoleArn)
	}
	vpcID, e := s.subnetsVpcLocked(q, in.ResourcesVpcConfig.SubnetIDs, true)
	if e != nil {
		return nil, e
	}
	key := s.clusterKey(q, in.Name)
	if s.state.clusters[key] != nil {
		return nil, errorf(http.StatusConflict, "ResourceInUseException", "Cluster already exists with name: %s", in.Name)
	}
	if in.Version == "" {
		in.Version = eksVersion
	}
	now := s.now()
	vc := in.ResourcesVpcConfig
	vc.VpcID = vpcID
	vc.ClusterSecurityGroupID = s.ec2ID("sg")
	if vc.SecurityGroupIDs == nil {
		vc.SecurityGroupIDs = []string{}
	}
	if !vc.EndpointPrivateAccess && !vc.EndpointPublicAccess {
		vc.EndpointPublicAccess = true
	}
	if in.Tags == nil {
		in.Tags = map[string]string{}
	}
	c := &eksCluster{
		Name: in.Name, Arn: fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", q.region, q.account(), in.Name), CreatedAt: epoch(now),
		Version: in.Version, RoleArn: in.RoleArn, ResourcesVpcConfig: vc, Status: eksCreating, PlatformVersion: "eks.1", Tags: in.Tags,
		Identity: eksIdentity{eksOIDC{fmt.Sprintf("https://oidc.eks.%s.amazonaws.com/id/%s", q.region, randomString(32, "0123456789ABCDEF"))}},
		account:  q.account(), region: q.region, readyAt: now.Add(s.cfg.ClusterDelay), nodegroups: map[string]*nodegroup{},
	}
	if err := s.startKubeLocked(c); err != nil {
		return nil, errorf(http.StatusInternalServerError, "ServerException", "start the cluster endpoint: %v", err)
	}
	s.state.clusters[key] = c
	return &reply{body: map[string]any{"cluster": c}}, nil
}

// subnetsVpcLocked checks that the subnets exist in the caller's account
// and one VPC (in two zones at least, for a cluster) and returns the VPC.
func (s *Sim) subnetsVpcLocked(q *request, ids []string, twoZones bool) (string, *apiError) {
	if len(ids) == 0 {
		return "", badEKS("Subnets are required")
	}
	vpcID := ""
	zones := map[string]bool{}
	for _, id := range ids {
		n := s.state.subnets[id]
		if n == nil || n.account != q.account() || n.region != q.region {
			return "", badEKS("The subnet ID '%s' does not exist", id)
		}
		if vpcID != "" && n.VpcID != vpcID {
			return "", badEKS("Subnets %s are not in the same VPC", strings.Join(ids, ", "))
		}
		vpcID = n.VpcID
		zones[n.AZ] = true
	}
	if twoZones && len(zones) < 2 {
		return "", badEKS("Subnets specified must be in at least two different AZs")
	}
	return vpcID, nil
}

func (s *Sim) listClusters(q *request) (*reply, *apiError) {
	names := []string{}
	for _, c := range s.state.clusters {
		if c.account == q.account() && c.region == q.region {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	return &reply{body: map[string]any{"clusters": names}}, nil
}

func (s *Sim) describeCluster(_ *request, c *eksCluster) (*reply, *apiError) {
	return &reply{body: map[string]any{"cluster": c}}, nil
}

func (s *Sim) deleteCluster(_ *request, c *eksCluster) (*reply, *apiError) {
	if len(c.nodegroups) > 0 {
		return nil, errorf(http.StatusConflict, "ResourceInUseException", "Cluster has nodegroups attached")
	}
	if c.Status != eksDeleting {
		c.Status = eksDeleting
		c.goneAt = s.now().Add(s.cfg.DeleteDelay)
		s.stopKubeLocked(c)
	}
	return &reply{body: map[string]any{"cluster": c}}, nil
}

func (s *Sim) createNodegroup(q *request, c *eksCluster) (*reply, *apiError) {
	var in struct {
		NodegroupName string            `json:"nodegroupName"`
		ScalingConfig scalingConfig     `json:"scalingConfig"`
		Subnets       []string          `json:"subnets"`
		InstanceTypes []string          `json:"instanceTypes"`
		AmiType       string            `json:"amiType"`
		NodeRole      string            `json:"nodeRole"`
		Labels        map[string]string `json:"labels"`
		Tags          map[string]string `json:"tags"`
		CapacityType  string            `json:"capacityType"`
		DiskSize      int32             `json:"diskSize"`
		Version       string            `json:"version"`
	}
	if e := decodeJSON(q, &in); e != nil {
		return nil, e
	}
	q.param("nodegroupName", in.NodegroupName)
	if c.Status != eksActive {
		return nil, errorf(http.StatusBadRequest, "InvalidRequestException", "Cluster '%s' is not in ACTIVE status", c.Name)
	}
	if !matches(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,62}$`, in.NodegroupName) {
		return nil, badEKS("The node group name %q is invalid", in.NodegroupName)
	}
	if !s.roleExistsLocked(q.account(), in.NodeRole) {
		return nil, badEKS("The nodeRole %s does not exist or is not a role of this account", in.NodeRole)
	}
	if _, e := s.subnetsVpcLocked(q, in.Subnets, false); e != nil {
		return nil, e
	}
	sc, e := mergeScaling(scalingConfig{MinSize: ptr(int32(1)), MaxSize: ptr(int32(2)), DesiredSize: ptr(int32(2))}, in.ScalingConfig)
	if e != nil {
		return nil, e
	}
	if c.nodegroups[in.NodegroupName] != nil {
		return nil, errorf(http.StatusConflict, "ResourceInUseException", "NodeGroup already exists with name %s and cluster name %s", in.NodegroupName, c.Name)
	}
	now := s.now()
	g := &nodegroup{
		NodegroupName: in.NodegroupName, ClusterName: c.Name,
		NodegroupArn: fmt.Sprintf("arn:aws:eks:%s:%s:nodegroup/%s/%s/%s", c.region, c.account, c.Name, in.NodegroupName, newRequestID()),
		Version:      cmpOr(in.Version, c.Version), ReleaseVersion: c.Version + ".0-20260101", CreatedAt: epoch(now), ModifiedAt: epoch(now),
		Status: eksCreating, CapacityType: cmpOr(in.CapacityType, "ON_DEMAND"), ScalingConfig: sc,
		InstanceTypes: in.InstanceTypes, Subnets: in.Subnets, AmiType: cmpOr(in.AmiType, "AL2023_x86_64_STANDARD"), NodeRole: in.NodeRole,
		Labels: in.Labels, Tags: in.Tags, DiskSize: in.DiskSize, Health: nodegroupHealth{Issues: []any{}},
		Resources: nodegroupResources{AutoScalingGroups: []asg{{Name: "eks-" + in.NodegroupName + "-" + randomString(8, lowerHex)}}},
		readyAt:   now.Add(s.cfg.NodegroupDelay),
	}
	if len(g.InstanceTypes) == 0 {
		g.InstanceTypes = []string{"t3.medium"}
	}
	if g.DiskSize == 0 {
		g.DiskSize = 20
	}
	if g.Labels == nil {
		g.Labels = map[string]string{}
	}
	if g.Tags == nil {
		g.Tags = map[string]string{}
	}
	c.nodegroups[g.NodegroupName] = g
	return &reply{body: map[string]any{"nodegroup": g}}, nil
}

func ptr[T any](v T) *T { return &v }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// mergeScaling applies the sizes given in upd to cur and checks
// 0 <= min <= desired <= max, max >= 1.
func mergeScaling(cur, upd scalingConfig) (scalingConfig, *apiError) {
	if upd.MinSize != nil {
		cur.MinSize = upd.MinSize
	}
	if upd.MaxSize != nil {
		cur.MaxSize = upd.MaxSize
	}
	if upd.DesiredSize != nil {
		cur.DesiredSize = upd.DesiredSize
	}
	mn, mx, d := *cur.MinSize, *cur.MaxSize, *cur.DesiredSize
	switch {
	case mn < 0:
		return cur, badEKS("Minimum capacity %d can't be negative", mn)
	case mx < 1:
		return cur, badEKS("Maximum capacity %d can't be less than 1", mx)
	case mn > mx:
		return cur, badEKS("Minimum capacity %d can't be greater than maximum capacity %d", mn, mx)
	case d < mn || d > mx:
		return cur, badEKS("Desired capacity %d can't be lower than minimum capacity %d or greater than maximum capacity %d", d, mn, mx)
	}
	return cur, nil
}

func (s *Sim) listNodegroups(_ *request, c *eksCluster) (*reply, *apiError) {
	names := slices.Sorted(maps.Keys(c.nodegroups))
	if names == nil {
		names = []string{}
	}
	return &reply{body: map[string]any{"nodegroups": names}}, nil
}

func (s *Sim) describeNodegroup(_ *request, _ *eksCluster, g *nodegroup) (*reply, *apiError) {
	return &reply{body: map[string]any{"nodegroup": g}}, nil
}

func (s *Sim) deleteNodegroup(_ *request, c *eksCluster, g *nodegroup) (*reply, *apiError) {
	if g.Status != eksDeleting {
		g.Status = eksDeleting
		g.goneAt = s.now().Add(s.cfg.DeleteDelay)
		g.ModifiedAt = epoch(s.now())
	}
	return &reply{body: map[string]any{"nodegroup": g}}, nil
}

func (s *Sim) updateNodegroupConfig(q *request, c *eksCluster, g *nodegroup) (*reply, *apiError) {
	var in struct {
		ScalingConfig *scalingConfig `json:"scalingConfig"`
		Labels        *struct {
			AddOrUpdateLabels map[string]string `json:"addOrUpdateLabels"`
			RemoveLabels      []string          `json:"removeLabels"`
		} `json:"labels"`
	}
	if e := decodeJSON(q, &in); e != nil {
		return nil, e
	}
	if g.Status != eksActive {
		return nil, errorf(http.StatusConflict, "ResourceInUseException", "Nodegroup %s is currently %s; wait until it is ACTIVE", g.NodegroupName, g.Status)
	}
	if in.ScalingConfig == nil && in.Labels == nil {
		return nil, badEKS("No changes needed")
	}
	now := s.now()
	u := &eksUpdate{ID: newRequestID(), Status: "InProgress", Type: "ConfigUpdate", CreatedAt: epoch(now), Errors: []any{},
		doneAt: now.Add(s.cfg.NodegroupDelay)}
	if in.ScalingConfig != nil {
		sc, e := mergeScaling(g.ScalingConfig, *in.ScalingConfig)
		if e != nil {
			return nil, e
		}
		g.ScalingConfig = sc
		u.Params = append(u.Params,
			eksUpdateParam{"MinSize", fmt.Sprint(*sc.MinSize)}, eksUpdateParam{"MaxSize", fmt.Sprint(*sc.MaxSize)},
			eksUpdateParam{"DesiredSize", fmt.Sprint(*sc.DesiredSize)})
		q.param("desiredSize", fmt.Sprint(*sc.DesiredSize))
	}
	if in.Labels != nil {
		maps.Copy(g.Labels, in.Labels.AddOrUpdateLabels)
		for _, k := range in.Labels.RemoveLabels {
			delete(g.Labels, k)
		}
		u.Params = append(u.Params, eksUpdateParam{"LabelsToAdd", fmt.Sprint(in.Labels.AddOrUpdateLabels)})
	}
	g.Status = eksUpdating
	g.readyAt = u.doneAt
	g.ModifiedAt = epoch(now)
	s.eksUpdates[u.ID] = u
	return &reply{body: map[string]any{"update": u}}, nil
}

func (s *Sim) describeUpdate(_ *request, _ *eksCluster, id string) (*reply, *apiError) {
	u := s.eksUpdates[id]
	if u == nil {
		return nil, errorf(http.StatusNotFound, "ResourceNotFoundException", "No update found for ID: %s", id)
	}
	return &reply{body: map[string]any{"update": u}}, nil
}

func (s *Sim) eksTags(q *request, arn, op string) (*reply, *apiError) {
	q.param("resourceArn", arn)
	var tags map[string]string
	for _, c := range s.state.clusters {
		if c.account != q.account() {
			continue
		}
		if c.Arn == arn {
			tags = c.Tags
		}
		for _, g := range c.nodegroups {
			if g.NodegroupArn == arn {
				tags = g.Tags
			}
		}
	}
	if tags == nil {
		return nil, errorf(http.StatusNotFound, "NotFoundException", "Resource %s not found", arn)
	}
	switch op {
	case "tag":
		var in struct {
			Tags map[string]string `json:"tags"`
		}
		if e := decodeJSON(q, &in); e != nil {
			return nil, e
		}
		if len(in.Tags) == 0 {
			return nil, errorf(http.StatusBadRequest, "BadRequestException", "tags are required")
		}
		maps.Copy(tags, in.Tags)
		return &reply{body: map[string]any{}}, nil
	case "untag":
		for _, k := range q.r.URL.Query()["tagKeys"] {
			delete(tags, k)
		}
		return &reply{body: map[string]any{}}, nil
	}
	return &reply{body: map[string]any{"tags": tags}}, nil
}

// advanceEKSLocked moves clusters, node groups and updates along their
// lifecycles.
func (s *Sim) advanceEKSLocked(now time.Time) {
	for key, c := range s.state.clusters {
		switch c.Status {
		case eksCreating:
			if !due(now, c.readyAt) {
				continue
			}
			switch ready, err := c.kube.readiness(); {
			case err != nil:
				c.Status = eksFailed
				c.Health = &eksHealth{Issues: []eksIssue{{Code: "InternalFailure", Message: err.Error()}}}
			case ready:
				c.Status = eksActive
				c.Endpoint = c.kube.endpoint()
				c.CertificateAuthority = &eksCA{Data: c.kube.caData()}
			}
		case eksDeleting:
			if due(now, c.goneAt) && c.kube.stopped() {
				delete(s.state.clusters, key)
			}
		}
		for name, g := range c.nodegroups {
			switch g.Status {
			case eksCreating, eksUpdating:
				if due(now, g.readyAt) {
					g.Status = eksActive
					g.ModifiedAt = epoch(now)
					s.scaleNodesLocked(c, g)
				}
			case eksDeleting:
				if due(now, g.goneAt) {
					delete(c.nodegroups, name)
					g.ScalingConfig.DesiredSize = ptr(int32(0))
					s.scaleNodesLocked(c, g)
				}
			}
		}
	}
	for _, u := range s.eksUpdates {
		if u.Status == "InProgress" && due(now, u.doneAt) {
			u.Status = "Successful"
		}
	}
}
