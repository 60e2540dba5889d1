package awssim

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
)

type vpc struct {
	ID      string
	CIDR    string
	Tags    tagMap
	account string
	region  string
}

type subnet struct {
	ID      string
	VpcID   string
	CIDR    string
	AZ      string
	Tags    tagMap
	account string
	region  string
}

type ec2Tag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func (t *tagMap) ec2() []ec2Tag {
	var out []ec2Tag
	for _, k := range t.sorted() {
		out = append(out, ec2Tag{k, t.m[k]})
	}
	return out
}

type vpcXML struct {
	VpcID           string   `xml:"vpcId"`
	OwnerID         string   `xml:"ownerId"`
	State           string   `xml:"state"`
	CidrBlock       string   `xml:"cidrBlock"`
	DhcpOptionsID   string   `xml:"dhcpOptionsId"`
	InstanceTenancy string   `xml:"instanceTenancy"`
	IsDefault       bool     `xml:"isDefault"`
	TagSet          []ec2Tag `xml:"tagSet>item"`
}

func (v *vpc) xml() vpcXML {
	return vpcXML{v.ID, v.account, "available", v.CIDR, "dopt-00000000", "default", false, v.Tags.ec2()}
}

type subnetXML struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetArn               string   `xml:"subnetArn"`
	OwnerID                 string   `xml:"ownerId"`
	State                   string   `xml:"state"`
	VpcID                   string   `xml:"vpcId"`
	CidrBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	AvailabilityZoneID      string   `xml:"availabilityZoneId"`
	DefaultForAz            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	TagSet                  []ec2Tag `xml:"tagSet>item"`
}

func (n *subnet) xml() subnetXML {
	count := 0
	if _, ipn, err := net.ParseCIDR(n.CIDR); err == nil {
		ones, bits := ipn.Mask.Size()
		count = 1<<(bits-ones) - 5
	}
	return subnetXML{n.ID, fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", n.region, n.account, n.ID), n.account, "available",
		n.VpcID, n.CIDR, count, n.AZ, fmt.Sprintf("%s1-az%d", n.region[:2], n.AZ[len(n.AZ)-1]-'a'+1), false, false, n.Tags.ec2()}
}

func (s *Sim) ec2Actions() map[string]handler {
	return map[string]handler{
		"CreateVpc":                     s.createVpc,
		"DescribeVpcs":                  s.describeVpcs,
		"DeleteVpc":                     s.deleteVpc,
		"CreateSubnet":                  s.createSubnet,
		"DescribeSubnets":               s.describeSubnets,
		"DeleteSubnet":                  s.deleteSubnet,
		"CreateTags":                    s.createTags,
		"DeleteTags":                    s.deleteTags,
		"DescribeAvailabilityZones":     s.describeAZs,
		"CreateSecurityGroup":           s.createSecurityGroup,
		"DescribeSecurityGroups":        s.describeSecurityGroups,
		"AuthorizeSecurityGroupIngress": s.authorizeIngress,
		"RevokeSecurityGroupIngress":    s.revokeIngress,
		"DeleteSecurityGroup":           s.deleteSecurityGroup,
	}
}

func (s *Sim) ec2ID(prefix string) string {
	return fmt.Sprintf("%s-%017x", prefix, 0x0a000000000000+s.nextID())
}

// tagSpecs reads TagSpecification.N for one resource type.
func tagSpecs(q *request, resourceType string) (tagMap, *apiError) {
	var t tagMap
	for i := 1; ; i++ {
		p := fmt.Sprintf("TagSpecification.%d.", i)
		rt := q.form.Get(p + "ResourceType")
		if rt == "" {
			return t, nil
		}
		if rt != resourceType {
			return t, errorf(http.StatusBadRequest, "InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", rt)
		}
		for _, tag := range formStructs(q.form, p+"Tag") {
			t.set(tag["Key"], tag["Value"])
		}
	}
}

func parseCIDR(field, v string) (*net.IPNet, *apiError) {
	ip, n, err := net.ParseCIDR(v)
	if err != nil || ip.To4() == nil {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterValue", "Value (%s) for parameter %s is invalid. This is not a valid CIDR block.", v, field)
	}
	return n, nil
}

func (s *Sim) createVpc(q *request) (*reply, *apiError) {
	cidr := q.form.Get("CidrBlock")
	n, e := parseCIDR("cidrBlock", cidr)
	if e != nil {
		return nil, e
	}
	if ones, _ := n.Mask.Size(); ones < 16 || ones > 28 {
		return nil, errorf(http.StatusBadRequest, "InvalidVpc.Range", "The CIDR '%s' is invalid.", cidr)
	}
	tags, e := tagSpecs(q, "vpc")
	if e != nil {
		return nil, e
	}
	v := &vpc{ID: s.ec2ID("vpc"), CIDR: n.String(), Tags: tags, account: q.account(), region: q.region}
	s.state.vpcs[v.ID] = v
	q.param("VpcId", v.ID)
	return &reply{body: struct {
		Vpc vpcXML `xml:"vpc"`
	}{v.xml()}}, nil
}

// ec2Meta is what Describe calls read of an EC2 resource.
type ec2Meta struct {
	id, account, region string
	tags                tagMap
	fields              map[string]string // filter name -> value
}

// ec2Resource is a VPC, subnet or security group.
type ec2Resource interface{ meta() ec2Meta }

func (v *vpc) meta() ec2Meta {
	return ec2Meta{v.ID, v.account, v.region, v.Tags,
		map[string]string{"vpc-id": v.ID, "cidr-block": v.CIDR, "cidr": v.CIDR, "state": "available", "owner-id": v.account}}
}

func (n *subnet) meta() ec2Meta {
	return ec2Meta{n.ID, n.account, n.region, n.Tags, map[string]string{"subnet-id": n.ID, "vpc-id": n.VpcID, "cidr-block": n.CIDR,
		"availability-zone": n.AZ, "state": "available", "owner-id": n.account}}
}

func noSuchVpc(id string) *apiError {
	return errorf(http.StatusBadRequest, "InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
}

func noSuchSubnet(id string) *apiError {
	return errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
}

// ownEC2 returns the caller's resource by ID, or the not-found error.
func ownEC2[R ec2Resource](q *request, all map[string]R, id string, notFound func(string) *apiError) (R, *apiError) {
	r, ok := all[id]
	if !ok || r.meta().account != q.account() {
		var zero R
		return zero, notFound(id)
	}
	return r, nil
}

// describeEC2 answers a Describe call: the caller's resources in the
// request's region, limited to the IDs listed in idParam.N (each must
// exist) and to the filters, sorted by ID.
func describeEC2[R ec2Resource, X any](q *request, all map[string]R, idParam string, notFound func(string) *apiError, toXML func(R) X) ([]X, *apiError) {
	ids := formList(q.form, idParam)
	for _, id := range ids {
		if _, e := ownEC2(q, all, id, notFound); e != nil {
			return nil, e
		}
	}
	filters := filtersOf(q)
	var keys []string
	for id, r := range all {
		m := r.meta()
		if m.account != q.account() || m.region != q.region || (len(ids) > 0 && !slices.Contains(ids, id)) {
			continue
		}
		ok, e := matchFilters(filters, m.tags, m.fields)
		if e != nil {
			return nil, e
		}
		if ok {
			keys = append(keys, id)
		}
	}
	slices.Sort(keys)
	var out []X
	for _, k := range keys {
		out = append(out, toXML(all[k]))
	}
	return out, nil
}

// ec2Filter is one Filter.N of a Describe call.
type ec2Filter struct {
	name   string
	values []string
}

func filtersOf(q *request) []ec2Filter {
	var out []ec2Filter
	for i := 1; ; i++ {
		p := fmt.Sprintf("Filter.%d.", i)
		name := q.form.Get(p + "Name")
		if name == "" {
			return out
		}
		out = append(out, ec2Filter{name, formList(q.form, p+"Value")})
	}
}

// matchFilters applies the filters; fields maps a filter name to the
// resource's value (tag:K and tag-key are handled here).
func matchFilters(filters []ec2Filter, tags tagMap, fields map[string]string) (bool, *apiError) {
	for _, f := range filters {
		var have []string
		switch {
		case strings.HasPrefix(f.name, "tag:"):
			if v, ok := tags.m[strings.TrimPrefix(f.name, "tag:")]; ok {
				have = []string{v}
			}
		case f.name == "tag-key":
			have = tags.sorted()
		default:
			v, ok := fields[f.name]
			if !ok {
				return false, errorf(http.StatusBadRequest, "InvalidParameterValue", "The filter '%s' is invalid", f.name)
			}
			have = []string{v}
		}
		hit := false
		for _, h := range have {
			hit = hit || slices.Contains(f.values, h)
		}
		if !hit {
			return false, nil
		}
	}
	return true, nil
}

func (s *Sim) describeVpcs(q *request) (*reply, *apiError) {
	out, e := describeEC2(q, s.state.vpcs, "VpcId", noSuchVpc, (*vpc).xml)
	if e != nil {
		return nil, e
	}
	return &reply{body: struct {
		VpcSet []vpcXML `xml:"vpcSet>item"`
	}{out}}, nil
}

func (s *Sim) deleteVpc(q *request) (*reply, *apiError) {
	id := q.form.Get("VpcId")
	if _, e := ownEC2(q, s.state.vpcs, id, noSuchVpc); e != nil {
		return nil, e
	}
	for _, n := range s.state.subnets {
		if n.VpcID == id {
			return nil, errorf(http.StatusBadRequest, "DependencyViolation", "The vpc '%s' has dependencies and cannot be deleted.", id)
		}
	}
	for _, g := range s.state.groups {
		if g.VpcID == id {
			return nil, errorf(http.StatusBadRequest, "DependencyViolation", "The vpc '%s' has dependencies and cannot be deleted.", id)
		}
	}
	delete(s.state.vpcs, id)
	return &reply{}, nil
}

func (s *Sim) createSubnet(q *request) (*reply, *apiError) {
	vpcID := q.form.Get("VpcId")
	v, e := ownEC2(q, s.state.vpcs, vpcID, noSuchVpc)
	if e != nil {
		return nil, e
	}
	cidr := q.form.Get("CidrBlock")
	n, e := parseCIDR("cidrBlock", cidr)
	if e != nil {
		return nil, e
	}
	_, vn, _ := net.ParseCIDR(v.CIDR)
	vOnes, _ := vn.Mask.Size()
	if ones, _ := n.Mask.Size(); !vn.Contains(n.IP) || ones < vOnes || ones > 28 {
		return nil, errorf(http.StatusBadRequest, "InvalidSubnet.Range", "The CIDR '%s' is invalid.", cidr)
	}
	for _, o := range s.state.subnets {
		if _, on, _ := net.ParseCIDR(o.CIDR); o.VpcID == vpcID && (on.Contains(n.IP) || n.Contains(on.IP)) {
			return nil, errorf(http.StatusBadRequest, "InvalidSubnet.Conflict", "The CIDR '%s' conflicts with another subnet", cidr)
		}
	}
	az := q.form.Get("AvailabilityZone")
	if az == "" {
		az = q.region + "a"
	}
	if !strings.HasPrefix(az, q.region) || len(az) != len(q.region)+1 {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterValue", "Value (%s) for parameter availabilityZone is invalid. Subnets can currently only be created in the following availability zones: %sa, %sb, %sc.", az, q.region, q.region, q.region)
	}
	tags, e := tagSpecs(q, "subnet")
	if e != nil {
		return nil, e
	}
	sn := &subnet{ID: s.ec2ID("subnet"), VpcID: vpcID, CIDR: n.String(), AZ: az, Tags: tags, account: q.account(), region: q.region}
	s.state.subnets[sn.ID] = sn
	q.param("SubnetId", sn.ID)
	return &reply{body: struct {
		Subnet subnetXML `xml:"subnet"`
	}{sn.xml()}}, nil
}

func (s *Sim) describeSubnets(q *request) (*reply, *apiError) {
	out, e := describeEC2(q, s.state.subnets, "SubnetId", noSuchSubnet, (*subnet).xml)
	if e != nil {
		return nil, e
	}
	return &reply{body: struct {
		SubnetSet []subnetXML `xml:"subnetSet>item"`
	}{out}}, nil
}

func (s *Sim) deleteSubnet(q *request) (*reply, *apiError) {
	id := q.form.Get("SubnetId")
	if _, e := ownEC2(q, s.state.subnets, id, noSuchSubnet); e != nil {
		return nil, e
	}
	if s.subnetInUseLocked(id) {
		return nil, errorf(http.StatusBadRequest, "DependencyViolation", "The subnet '%s' has dependencies and cannot be deleted.", id)
	}
	delete(s.state.subnets, id)
	return &reply{}, nil
}

// subnetInUseLocked reports whether an EKS cluster, node group or RDS subnet
// group still uses the subnet.
func (s *Sim) subnetInUseLocked(id string) bool {
	for _, c := range s.state.clusters {
		if slices.Contains(c.ResourcesVpcConfig.SubnetIDs, id) {
			return true
		}
		for _, g := range c.nodegroups {
			if slices.Contains(g.Subnets, id) {
				return true
			}
		}
	}
	for _, g := range s.state.subnetGroups {
		if slices.Contains(g.SubnetIDs, id) {
			return true
		}
	}
	return false
}

// taggedLocked finds the tag set of an EC2 resource by ID.
func (s *Sim) taggedLocked(q *request, id string) (*tagMap, *apiError) {
	switch {
	case strings.HasPrefix(id, "vpc-"):
		v, e := ownEC2(q, s.state.vpcs, id, noSuchVpc)
		if e != nil {
			return nil, e
		}
		return &v.Tags, nil
	case strings.HasPrefix(id, "sg-"):
		g, e := ownEC2(q, s.state.groups, id, noSuchGroup)
		if e != nil {
			return nil, e
		}
		return &g.Tags, nil
	case strings.HasPrefix(id, "subnet-"):
		n, e := ownEC2(q, s.state.subnets, id, noSuchSubnet)
		if e != nil {
			return nil, e
		}
		return &n.Tags, nil
	}
	return nil, errorf(http.StatusBadRequest, "InvalidID", "The ID '%s' is not valid", id)
}

func (s *Sim) createTags(q *request) (*reply, *apiError) {
	ids := formList(q.form, "ResourceId")
	tags := formStructs(q.form, "Tag")
	var sets []*tagMap
	for _, id := range ids {
		t, e := s.taggedLocked(q, id)
		if e != nil {
			return nil, e
		}
		sets = append(sets, t)
	}
	for _, t := range sets {
		for _, tag := range tags {
			t.set(tag["Key"], tag["Value"])
		}
	}
	return &reply{}, nil
}

func (s *Sim) deleteTags(q *request) (*reply, *apiError) {
	for _, id := range formList(q.form, "ResourceId") {
		t, e := s.taggedLocked(q, id)
		if e != nil {
			return nil, e
		}
		for _, tag := range formStructs(q.form, "Tag") {
			delete(t.m, tag["Key"])
		}
	}
	return &reply{}, nil
}

func (s *Sim) describeAZs(q *request) (*reply, *apiError) {
	type az struct {
		ZoneName   string `xml:"zoneName"`
		ZoneID     string `xml:"zoneId"`
		ZoneState  string `xml:"zoneState"`
		RegionName string `xml:"regionName"`
	}
	var out []az
	for i, l := range []string{"a", "b", "c"} {
		out = append(out, az{q.region + l, fmt.Sprintf("%s1-az%d", q.region[:2], i+1), "available", q.region})
	}
	return &reply{body: struct {
		Zones []az `xml:"availabilityZoneInfo>item"`
	}{out}}, nil
}
