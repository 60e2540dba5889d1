package awssim

import (
	"fmt"
	"net/http"
	"slices"
)

type securityGroup struct {
	ID          string
	Name        string
	Description string
	VpcID       string
	Tags        tagMap
	ingress     []ipPermission
	account     string
	region      string
}

type ipRange struct {
	CidrIP string `xml:"cidrIp"`
}

type groupPair struct {
	GroupID string `xml:"groupId"`
}

type ipPermission struct {
	IPProtocol string      `xml:"ipProtocol"`
	FromPort   string      `xml:"fromPort,omitempty"`
	ToPort     string      `xml:"toPort,omitempty"`
	IPRanges   []ipRange   `xml:"ipRanges>item"`
	Groups     []groupPair `xml:"groups>item"`
}

type securityGroupXML struct {
	OwnerID             string         `xml:"ownerId"`
	GroupID             string         `xml:"groupId"`
	GroupName           string         `xml:"groupName"`
	GroupDescription    string         `xml:"groupDescription"`
	VpcID               string         `xml:"vpcId"`
	IPPermissions       []ipPermission `xml:"ipPermissions>item"`
	IPPermissionsEgress []ipPermission `xml:"ipPermissionsEgress>item"`
	TagSet              []ec2Tag       `xml:"tagSet>item"`
}

func (g *securityGroup) xml() securityGroupXML {
	return securityGroupXML{g.account, g.ID, g.Name, g.Description, g.VpcID, g.ingress,
		[]ipPermission{{IPProtocol: "-1", IPRanges: []ipRange{{"0.0.0.0/0"}}}}, g.Tags.ec2()}
}

func noSuchGroup(id string) *apiError {
	return errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
}

func (s *Sim) createSecurityGroup(q *request) (*reply, *apiError) {
	name, desc, vpcID := q.form.Get("GroupName"), q.form.Get("GroupDescription"), q.form.Get("VpcId")
	if name == "" || desc == "" {
		return nil, errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameters GroupName and GroupDescription")
	}
	if _, e := ownEC2(q, s.state.vpcs, vpcID, noSuchVpc); e != nil {
		return nil, e
	}
	for _, g := range s.state.groups {
		if g.VpcID == vpcID && g.Name == name {
			return nil, errorf(http.StatusBadRequest, "InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", name, vpcID)
		}
	}
	tags, e := tagSpecs(q, "security-group")
	if e != nil {
		return nil, e
	}
	g := &securityGroup{ID: s.ec2ID("sg"), Name: name, Description: desc, VpcID: vpcID, Tags: tags, account: q.account(), region: q.region}
	s.state.groups[g.ID] = g
	q.param("GroupId", g.ID)
	return &reply{body: struct {
		Return  bool     `xml:"return"`
		GroupID string   `xml:"groupId"`
		TagSet  []ec2Tag `xml:"tagSet>item"`
	}{true, g.ID, g.Tags.ec2()}}, nil
}

func (g *securityGroup) meta() ec2Meta {
	return ec2Meta{g.ID, g.account, g.region, g.Tags, map[string]string{"group-id": g.ID, "group-name": g.Name, "vpc-id": g.VpcID, "owner-id": g.account}}
}

func (s *Sim) describeSecurityGroups(q *request) (*reply, *apiError) {
	out, e := describeEC2(q, s.state.groups, "GroupId", noSuchGroup, (*securityGroup).xml)
	if e != nil {
		return nil, e
	}
	return &reply{body: struct {
		Groups []securityGroupXML `xml:"securityGroupInfo>item"`
	}{out}}, nil
}

// permissionsOf reads IpPermissions.N of an Authorize/Revoke call.
func permissionsOf(q *request) []ipPermission {
	var out []ipPermission
	for i := 1; ; i++ {
		p := fmt.Sprintf("IpPermissions.%d.", i)
		proto := q.form.Get(p + "IpProtocol")
		if proto == "" {
			return out
		}
		perm := ipPermission{IPProtocol: proto, FromPort: q.form.Get(p + "FromPort"), ToPort: q.form.Get(p + "ToPort")}
		for _, r := range formStructs(q.form, p+"IpRanges") {
			perm.IPRanges = append(perm.IPRanges, ipRange{r["CidrIp"]})
		}
		for _, g := range formStructs(q.form, p+"Groups") {
			perm.Groups = append(perm.Groups, groupPair{g["GroupId"]})
		}
		out = append(out, perm)
	}
}

func (s *Sim) authorizeIngress(q *request) (*reply, *apiError) {
	g, e := ownEC2(q, s.state.groups, q.form.Get("GroupId"), noSuchGroup)
	if e != nil {
		return nil, e
	}
	perms := permissionsOf(q)
	if len(perms) == 0 {
		return nil, errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter IpPermissions")
	}
	for _, p := range perms {
		for _, old := range g.ingress {
			if fmt.Sprint(old) == fmt.Sprint(p) {
				return nil, errorf(http.StatusBadRequest, "InvalidPermission.Duplicate", "the specified rule \"peer: %v, %s, from port: %s, to port: %s, ALLOW\" already exists", p.IPRanges, p.IPProtocol, p.FromPort, p.ToPort)
			}
		}
	}
	g.ingress = append(g.ingress, perms...)
	return &reply{}, nil
}

func (s *Sim) revokeIngress(q *request) (*reply, *apiError) {
	g, e := ownEC2(q, s.state.groups, q.form.Get("GroupId"), noSuchGroup)
	if e != nil {
		return nil, e
	}
	for _, p := range permissionsOf(q) {
		g.ingress = slices.DeleteFunc(g.ingress, func(old ipPermission) bool { return fmt.Sprint(old) == fmt.Sprint(p) })
	}
	return &reply{}, nil
}

func (s *Sim) deleteSecurityGroup(q *request) (*reply, *apiError) {
	g, e := ownEC2(q, s.state.groups, q.form.Get("GroupId"), noSuchGroup)
	if e != nil {
		return nil, e
	}
	id := g.ID
	for _, d := range s.state.dbs {
		if slices.Contains(d.SecurityGroups, id) {
			return nil, errorf(http.StatusBadRequest, "DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	for _, c := range s.state.clusters {
		if slices.Contains(c.ResourcesVpcConfig.SecurityGroupIDs, id) {
			return nil, errorf(http.StatusBadRequest, "DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	delete(s.state.groups, id)
	return &reply{}, nil
}
