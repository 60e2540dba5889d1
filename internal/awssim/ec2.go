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
	ids := formList(q.form, "VpcId")
	for _, id := range ids {
		if v := s.state.vpcs[id]; v == nil || v.account != q.account() {
			return nil, errorf(http.StatusBadRequest, "InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
		}
	}
	filters := filtersOf(q)
	var out []vpcXML
	for _, v := range s.state.vpcs {
		if v.account != q.account() || v.region != q.region || (len(ids) > 0 && !slices.Contains(ids, v.ID)) {
			continue
		}
		ok, e := matchFilters(filters, v.Tags, map[string]string{"vpc-id": v.ID, "cidr-block": v.CIDR, "cidr": v.CIDR, "state": "available", "owner-id": v.account})
		if e != nil {
			return nil, e
		}
		if ok {
			out = append(out, v.xml())
		}
	}
	slices.SortFunc(out, func(a, b vpcXML) int { return strings.Compare(a.VpcID, b.VpcID) })
	return &reply{body: struct {
		VpcSet []vpcXML `xml:"vpcSet>item"`
	}{out}}, nil
}

func (s *Sim) deleteVpc(q *request) (*reply, *apiError) {
	id := q.form.Get("VpcId")
	v := s.state.vpcs[id]
	if v == nil || v.account != q.account() {
		return nil, errorf(http.StatusBadRequest, "InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
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
	v := s.state.vpcs[vpcID]
	if v == nil || v.account != q.account() {
		return nil, errorf(http.StatusBadRequest, "InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", vpcID)
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
	ids := formList(q.form, "SubnetId")
	for _, id := range ids {
		if n := s.state.subnets[id]; n == nil || n.account != q.account() {
			return nil, errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	filters := filtersOf(q)
	var out []subnetXML
	for _, n := range s.state.subnets {
		if n.account != q.account() || n.region != q.region || (len(ids) > 0 && !slices.Contains(ids, n.ID)) {
			continue
		}
		ok, e := matchFilters(filters, n.Tags, map[string]string{"subnet-id": n.ID, "vpc-id": n.VpcID, "cidr-block": n.CIDR,
			"availability-zone": n.AZ, "state": "available", "owner-id": n.account})
		if e != nil {
			return nil, e
		}
		if ok {
			out = append(out, n.xml())
		}
	}
	slices.SortFunc(out, func(a, b subnetXML) int { return strings.Compare(a.SubnetID, b.SubnetID) })
	return &reply{body: struct {
		SubnetSet []subnetXML `xml:"subnetSet>item"`
	}{out}}, nil
}

func (s *Sim) deleteSubnet(q *request) (*reply, *apiError) {
	id := q.form.Get("SubnetId")
	n := s.state.subnets[id]
	if n == nil || n.account != q.account() {
		return nil, errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
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
		if v := s.state.vpcs[id]; v != nil && v.account == q.account() {
			return &v.Tags, nil
		}
		return nil, errorf(http.StatusBadRequest, "InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
	case strings.HasPrefix(id, "sg-"):
		if g := s.state.groups[id]; g != nil && g.account == q.account() {
			return &g.Tags, nil
		}
		return nil, noSuchGroup(id)
	case strings.HasPrefix(id, "subnet-"):
		if n := s.state.subnets[id]; n != nil && n.account == q.account() {
			return &n.Tags, nil
		}
		return nil, errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
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
