package awssim

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

type dbSubnetGroup struct {
	Name        string
	Description string
	VpcID       string
	SubnetIDs   []string
	Tags        tagMap
	account     string
	region      string
}

type dbInstance struct {
	Identifier       string
	Class            string
	Engine           string
	EngineVersion    string
	Status           string
	MasterUsername   string
	DBName           string
	Port             int
	AllocatedStorage int
	SubnetGroup      string
	SecurityGroups   []string
	Public           bool
	Created          time.Time
	Tags             tagMap
	account          string
	region           string
	readyAt, goneAt  time.Time
	// source is the ARN of the instance a read replica streams from; empty for a primary.
	source string
}

type rdsSubnetXML struct {
	SubnetIdentifier string `xml:"SubnetIdentifier"`
	AZ               string `xml:"SubnetAvailabilityZone>Name"`
	SubnetStatus     string `xml:"SubnetStatus"`
}

type dbSubnetGroupXML struct {
	DBSubnetGroupName        string         `xml:"DBSubnetGroupName"`
	DBSubnetGroupDescription string         `xml:"DBSubnetGroupDescription,omitempty"`
	VpcID                    string         `xml:"VpcId"`
	SubnetGroupStatus        string         `xml:"SubnetGroupStatus"`
	Subnets                  []rdsSubnetXML `xml:"Subnets>Subnet,omitempty"`
	DBSubnetGroupArn         string         `xml:"DBSubnetGroupArn,omitempty"`
}

func (s *Sim) subnetGroupXML(g *dbSubnetGroup) dbSubnetGroupXML {
	x := dbSubnetGroupXML{g.Name, g.Description, g.VpcID, "Complete", nil, fmt.Sprintf("arn:aws:rds:%s:%s:subgrp:%s", g.region, g.account, g.Name)}
	for _, id := range g.SubnetIDs {
		az := ""
		if n := s.state.subnets[id]; n != nil {
			az = n.AZ
		}
		x.Subnets = append(x.Subnets, rdsSubnetXML{id, az, "Active"})
	}
	return x
}

type dbEndpointXML struct {
	Address      string `xml:"Address"`
	Port         int    `xml:"Port"`
	HostedZoneID string `xml:"HostedZoneId"`
}

type sgMembership struct {
	ID     string `xml:"VpcSecurityGroupId"`
	Status string `xml:"Status"`
}

type dbInstanceXML struct {
	DBInstanceIdentifier string            `xml:"DBInstanceIdentifier"`
	DBInstanceClass      string            `xml:"DBInstanceClass"`
	Engine               string            `xml:"Engine"`
	EngineVersion        string            `xml:"EngineVersion,omitempty"`
	DBInstanceStatus     string            `xml:"DBInstanceStatus"`
	MasterUsername       string            `xml:"MasterUsername"`
	DBName               string            `xml:"DBName,omitempty"`
	Endpoint             *dbEndpointXML    `xml:"Endpoint,omitempty"`
	AllocatedStorage     int               `xml:"AllocatedStorage"`
	InstanceCreateTime   string            `xml:"InstanceCreateTime,omitempty"`
	DBSubnetGroup        *dbSubnetGroupXML `xml:"DBSubnetGroup,omitempty"`
	VpcSecurityGroups    []sgMembership    `xml:"VpcSecurityGroups>VpcSecurityGroupMembership,omitempty"`
	PubliclyAccessible   bool              `xml:"PubliclyAccessible"`
	DBInstanceArn        string            `xml:"DBInstanceArn"`
	ReplicaSource        string            `xml:"ReadReplicaSourceDBInstanceIdentifier,omitempty"`
	Replicas             []string          `xml:"ReadReplicaDBInstanceIdentifiers>ReadReplicaDBInstanceIdentifier,omitempty"`
	DbiResourceID        string            `xml:"DbiResourceId"`
	TagList              []xmlTag          `xml:"TagList>Tag,omitempty"`
}

func (d *dbInstance) arn() string {
	return fmt.Sprintf("arn:aws:rds:%s:%s:db:%s", d.region, d.account, d.Identifier)
}

// Address is the DNS name RDS would give the instance.
func (d *dbInstance) address() string {
	return fmt.Sprintf("%s.c%s.%s.rds.amazonaws.com", d.Identifier, d.account[:10], d.region)
}

func (s *Sim) dbXML(d *dbInstance) dbInstanceXML {
	x := dbInstanceXML{DBInstanceIdentifier: d.Identifier, DBInstanceClass: d.Class, Engine: d.Engine, EngineVersion: d.EngineVersion,
		DBInstanceStatus: d.Status, MasterUsername: d.MasterUsername, DBName: d.DBName, AllocatedStorage: d.AllocatedStorage,
		PubliclyAccessible: d.Public, DBInstanceArn: d.arn(), DbiResourceID: "db-" + strings.ToUpper(hexSHA256([]byte(d.arn()))[:26]),
		TagList: d.Tags.xml(), ReplicaSource: d.source}
	for _, r := range s.state.dbs {
		if r.source == d.arn() {
			x.Replicas = append(x.Replicas, r.arn())
		}
	}
	slices.Sort(x.Replicas)
	if d.Status != "creating" {
		x.Endpoint = &dbEndpointXML{d.address(), d.Port, "Z2R2ITUGPM61AM"}
		x.InstanceCreateTime = d.Created.Format(isoTime)
	}
	if g := s.state.subnetGroups[d.account+"/"+d.region+"/"+d.SubnetGroup]; g != nil {
		gx := s.subnetGroupXML(g)
		x.DBSubnetGroup = &gx
	}
	for _, sg := range d.SecurityGroups {
		x.VpcSecurityGroups = append(x.VpcSecurityGroups, sgMembership{sg, "active"})
	}
	return x
}

func (s *Sim) rdsActions() map[string]handler {
	return map[string]handler{
		"CreateDBSubnetGroup":         s.createDBSubnetGroup,
		"DescribeDBSubnetGroups":      s.describeDBSubnetGroups,
		"DeleteDBSubnetGroup":         s.deleteDBSubnetGroup,
		"CreateDBInstance":            s.createDBInstance,
		"CreateDBInstanceReadReplica": s.createDBInstanceReadReplica,
		"DescribeDBInstances":         s.describeDBInstances,
		"DeleteDBInstance":            s.deleteDBInstance,
		"AddTagsToResource":           s.rdsAddTags,
		"ListTagsForResource":         s.rdsListTags,
	}
}

func rdsKey(q *request, name string) string { return q.account() + "/" + q.region + "/" + name }

func rdsBad(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, "InvalidParameterValue", format, args...)
}

func (s *Sim) createDBSubnetGroup(q *request) (*reply, *apiError) {
	name := q.form.Get("DBSubnetGroupName")
	if !matches(`^[a-zA-Z0-9][a-zA-Z0-9 ._-]{0,254}$`, name) || strings.EqualFold(name, "default") {
		return nil, rdsBad("The parameter DBSubnetGroupName %q is not a valid identifier.", name)
	}
	desc := q.form.Get("DBSubnetGroupDescription")
	if desc == "" {
		return nil, rdsBad("The parameter DBSubnetGroupDescription must be provided and must not be blank.")
	}
	ids := formList(q.form, "SubnetIds")
	vpcID := ""
	zones := map[string]bool{}
	for _, id := range ids {
		n := s.state.subnets[id]
		if n == nil || n.account != q.account() || n.region != q.region {
			return nil, errorf(http.StatusBadRequest, "InvalidSubnet", "Some input subnets in :[%s] are invalid.", strings.Join(ids, ", "))
		}
		if vpcID != "" && vpcID != n.VpcID {
			return nil, errorf(http.StatusBadRequest, "InvalidSubnet", "The subnets are in more than one VPC.")
		}
		vpcID = n.VpcID
		zones[n.AZ] = true
	}
	if len(zones) < 2 {
		return nil, errorf(http.StatusBadRequest, "DBSubnetGroupDoesNotCoverEnoughAZs",
			"The DB subnet group doesn't meet Availability Zone (AZ) coverage requirement. Current AZ coverage: %d. Add subnets to cover at least 2 AZs.", len(zones))
	}
	key := rdsKey(q, strings.ToLower(name))
	if s.state.subnetGroups[key] != nil {
		return nil, errorf(http.StatusBadRequest, "DBSubnetGroupAlreadyExists", "The DB subnet group '%s' already exists.", name)
	}
	g := &dbSubnetGroup{Name: strings.ToLower(name), Description: desc, VpcID: vpcID, SubnetIDs: ids, account: q.account(), region: q.region}
	for _, t := range formStructs(q.form, "Tags") {
		g.Tags.set(t["Key"], t["Value"])
	}
	s.state.subnetGroups[key] = g
	return &reply{body: struct {
		G dbSubnetGroupXML `xml:"DBSubnetGroup"`
	}{s.subnetGroupXML(g)}}, nil
}

func noSuchSubnetGroup(name string) *apiError {
	return errorf(http.StatusNotFound, "DBSubnetGroupNotFoundFault", "DB subnet group '%s' not found.", name)
}

func (s *Sim) describeDBSubnetGroups(q *request) (*reply, *apiError) {
	name := strings.ToLower(q.form.Get("DBSubnetGroupName"))
	var out []dbSubnetGroupXML
	for _, g := range s.state.subnetGroups {
		if g.account == q.account() && g.region == q.region && (name == "" || g.Name == name) {
			out = append(out, s.subnetGroupXML(g))
		}
	}
	if name != "" && len(out) == 0 {
		return nil, noSuchSubnetGroup(name)
	}
	slices.SortFunc(out, func(a, b dbSubnetGroupXML) int { return strings.Compare(a.DBSubnetGroupName, b.DBSubnetGroupName) })
	return &reply{body: struct {
		Groups []dbSubnetGroupXML `xml:"DBSubnetGroups>DBSubnetGroup"`
	}{out}}, nil
}

func (s *Sim) deleteDBSubnetGroup(q *request) (*reply, *apiError) {
	name := strings.ToLower(q.form.Get("DBSubnetGroupName"))
	key := rdsKey(q, name)
	if s.state.subnetGroups[key] == nil {
		return nil, noSuchSubnetGroup(name)
	}
	for _, d := range s.state.dbs {
		if d.account == q.account() && d.region == q.region && d.SubnetGroup == name {
			return nil, errorf(http.StatusBadRequest, "InvalidDBSubnetGroupStateFault", "Cannot delete the subnet group '%s' because at least one database instance: %s is still using it.", name, d.Identifier)
		}
	}
	delete(s.state.subnetGroups, key)
	return &reply{}, nil
}

func (s *Sim) createDBInstance(q *request) (*reply, *apiError) {
	f := q.form
	id := strings.ToLower(f.Get("DBInstanceIdentifier"))
	if !matches(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`, id) || len(id) > 63 {
		return nil, rdsBad("The parameter DBInstanceIdentifier is not a valid identifier. Identifiers must begin with a letter; must contain only ASCII letters, digits, and hyphens; and must not end with a hyphen or contain two consecutive hyphens.")
	}
	d := &dbInstance{Identifier: id, Class: f.Get("DBInstanceClass"), Engine: f.Get("Engine"), EngineVersion: f.Get("EngineVersion"),
		MasterUsername: f.Get("MasterUsername"), DBName: f.Get("DBName"), SubnetGroup: strings.ToLower(f.Get("DBSubnetGroupName")),
		SecurityGroups: formList(f, "VpcSecurityGroupIds"), Public: f.Get("PubliclyAccessible") == "true", Status: "creating",
		account: q.account(), region: q.region}
	switch {
	case d.Class == "":
		return nil, rdsBad("The parameter DBInstanceClass must be provided.")
	case d.Engine == "":
		return nil, rdsBad("The parameter Engine must be provided.")
	case d.MasterUsername == "":
		return nil, rdsBad("The parameter MasterUsername must be provided and must not be blank.")
	case len(f.Get("MasterUserPassword")) < 8 && f.Get("ManageMasterUserPassword") != "true":
		return nil, rdsBad("The parameter MasterUserPassword is not a valid password because it is shorter than 8 characters.")
	}
	switch {
	case strings.Contains(d.Engine, "postgres"):
		d.Port = 5432
	case strings.Contains(d.Engine, "mysql"), strings.Contains(d.Engine, "mariadb"):
		d.Port = 3306
	default:
		return nil, rdsBad("Invalid DB engine: %s", d.Engine)
	}
	if p := f.Get("Port"); p != "" {
		d.Port, _ = strconv.Atoi(p)
	}
	d.AllocatedStorage, _ = strconv.Atoi(f.Get("AllocatedStorage"))
	if d.AllocatedStorage == 0 {
		d.AllocatedStorage = 20
	}
	return s.addDB(q, d)
}

// createDBInstanceReadReplica makes a read replica of an available instance, named by identifier in the
// same region or by ARN from any region of the account; it takes the source's engine, version, user,
// database and storage.
func (s *Sim) createDBInstanceReadReplica(q *request) (*reply, *apiError) {
	f := q.form
	id := strings.ToLower(f.Get("DBInstanceIdentifier"))
	if !matches(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`, id) || len(id) > 63 {
		return nil, rdsBad("The parameter DBInstanceIdentifier is not a valid identifier.")
	}
	from := f.Get("SourceDBInstanceIdentifier")
	var src *dbInstance
	if strings.HasPrefix(from, "arn:") {
		for _, d := range s.state.dbs {
			if d.arn() == from && d.account == q.account() {
				src = d
			}
		}
	} else {
		src = s.state.dbs[rdsKey(q, strings.ToLower(from))]
		if src != nil {
			from = src.arn()
		}
	}
	switch {
	case src == nil:
		return nil, noSuchDB(f.Get("SourceDBInstanceIdentifier"))
	case src.region != q.region && !strings.HasPrefix(f.Get("SourceDBInstanceIdentifier"), "arn:"):
		return nil, rdsBad("The source instance of a cross-region read replica must be given by its ARN.")
	case src.Status != "available":
		return nil, errorf(http.StatusBadRequest, "InvalidDBInstanceState", "DB instance %s is not in available state.", src.Identifier)
	case src.source != "":
		return nil, rdsBad("A read replica of a read replica is not supported here.")
	}
	d := &dbInstance{Identifier: id, Class: cmpOr(f.Get("DBInstanceClass"), src.Class), Engine: src.Engine, EngineVersion: src.EngineVersion,
		MasterUsername: src.MasterUsername, DBName: src.DBName, Port: src.Port, AllocatedStorage: src.AllocatedStorage,
		SubnetGroup: strings.ToLower(f.Get("DBSubnetGroupName")), SecurityGroups: formList(f, "VpcSecurityGroupIds"),
		Public: f.Get("PubliclyAccessible") == "true", Status: "creating", account: q.account(), region: q.region, source: from}
	if src.region != q.region && d.SubnetGroup == "" {
		return nil, rdsBad("DBSubnetGroupName is required for a cross-region read replica in a VPC.")
	}
	return s.addDB(q, d)
}

// addDB stores a new instance (or read replica) in its subnet group, with the request's tags, creating
// until the configured delay has passed.
func (s *Sim) addDB(q *request, d *dbInstance) (*reply, *apiError) {
	if d.SubnetGroup != "" && s.state.subnetGroups[rdsKey(q, d.SubnetGroup)] == nil {
		return nil, noSuchSubnetGroup(d.SubnetGroup)
	}
	key := rdsKey(q, d.Identifier)
	if s.state.dbs[key] != nil {
		return nil, errorf(http.StatusBadRequest, "DBInstanceAlreadyExists", "DB instance already exists")
	}
	for _, t := range formStructs(q.form, "Tags") {
		d.Tags.set(t["Key"], t["Value"])
	}
	now := s.now()
	d.Created, d.readyAt = now, now.Add(s.cfg.DBDelay)
	s.state.dbs[key] = d
	return &reply{body: struct {
		DB dbInstanceXML `xml:"DBInstance"`
	}{s.dbXML(d)}}, nil
}

func noSuchDB(id string) *apiError {
	return errorf(http.StatusNotFound, "DBInstanceNotFound", "DBInstance %s not found.", id)
}

func (s *Sim) describeDBInstances(q *request) (*reply, *apiError) {
	id := strings.ToLower(q.form.Get("DBInstanceIdentifier"))
	var out []dbInstanceXML
	for _, d := range s.state.dbs {
		if d.account == q.account() && d.region == q.region && (id == "" || d.Identifier == id) {
			out = append(out, s.dbXML(d))
		}
	}
	if id != "" && len(out) == 0 {
		return nil, noSuchDB(id)
	}
	slices.SortFunc(out, func(a, b dbInstanceXML) int { return strings.Compare(a.DBInstanceIdentifier, b.DBInstanceIdentifier) })
	return &reply{body: struct {
		DBs []dbInstanceXML `xml:"DBInstances>DBInstance"`
	}{out}}, nil
}

func (s *Sim) deleteDBInstance(q *request) (*reply, *apiError) {
	id := strings.ToLower(q.form.Get("DBInstanceIdentifier"))
	d := s.state.dbs[rdsKey(q, id)]
	if d == nil {
		return nil, noSuchDB(id)
	}
	if q.form.Get("SkipFinalSnapshot") != "true" && q.form.Get("FinalDBSnapshotIdentifier") == "" {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterCombination", "FinalDBSnapshotIdentifier is required unless SkipFinalSnapshot is specified.")
	}
	if d.Status == "deleting" {
		return nil, errorf(http.StatusBadRequest, "InvalidDBInstanceState", "Instance %s is already being deleted.", id)
	}
	d.Status = "deleting"
	d.goneAt = s.now().Add(s.cfg.DeleteDelay)
	return &reply{body: struct {
		DB dbInstanceXML `xml:"DBInstance"`
	}{s.dbXML(d)}}, nil
}

// xmlTagged finds the tag set of an RDS resource by ARN.
func (s *Sim) xmlTagged(q *request) (*tagMap, *apiError) {
	arn := q.form.Get("ResourceName")
	for _, d := range s.state.dbs {
		if d.arn() == arn && d.account == q.account() {
			return &d.Tags, nil
		}
	}
	for _, g := range s.state.subnetGroups {
		if fmt.Sprintf("arn:aws:rds:%s:%s:subgrp:%s", g.region, g.account, g.Name) == arn && g.account == q.account() {
			return &g.Tags, nil
		}
	}
	return nil, noSuchDB(arn)
}

func (s *Sim) rdsAddTags(q *request) (*reply, *apiError) {
	t, e := s.xmlTagged(q)
	if e != nil {
		return nil, e
	}
	for _, tag := range formStructs(q.form, "Tags") {
		t.set(tag["Key"], tag["Value"])
	}
	return &reply{}, nil
}

func (s *Sim) rdsListTags(q *request) (*reply, *apiError) {
	t, e := s.xmlTagged(q)
	if e != nil {
		return nil, e
	}
	return &reply{body: struct {
		Tags []xmlTag `xml:"TagList>Tag"`
	}{t.xml()}}, nil
}

func (s *Sim) advanceRDSLocked(now time.Time) {
	for key, d := range s.state.dbs {
		switch d.Status {
		case "creating":
			if due(now, d.readyAt) {
				d.Status = "available"
			}
		case "deleting":
			if due(now, d.goneAt) {
				delete(s.state.dbs, key)
			}
		}
	}
}
