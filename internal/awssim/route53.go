package awssim

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

type hostedZone struct {
	ID       string
	Name     string // lower case, with the final dot
	CallerRf string
	Comment  string
	Private  bool
	records  []*rrSet
	tags     map[string]string
	account  string
}

type resourceRecord struct {
	Value string `xml:"Value"`
}

type aliasTarget struct {
	HostedZoneID         string `xml:"HostedZoneId"`
	DNSName              string `xml:"DNSName"`
	EvaluateTargetHealth bool   `xml:"EvaluateTargetHealth"`
}

type rrSet struct {
	Name            string           `xml:"Name"`
	Type            string           `xml:"Type"`
	SetIdentifier   string           `xml:"SetIdentifier,omitempty"`
	Weight          *int64           `xml:"Weight,omitempty"`
	Region          string           `xml:"Region,omitempty"`
	TTL             *int64           `xml:"TTL,omitempty"`
	ResourceRecords []resourceRecord `xml:"ResourceRecords>ResourceRecord,omitempty"`
	AliasTarget     *aliasTarget     `xml:"AliasTarget,omitempty"`
}

func (r *rrSet) key() string { return r.Name + "|" + r.Type + "|" + r.SetIdentifier }

type zoneConfig struct {
	Comment     string `xml:"Comment,omitempty"`
	PrivateZone bool   `xml:"PrivateZone"`
}

type hostedZoneXML struct {
	ID                     string     `xml:"Id"`
	Name                   string     `xml:"Name"`
	CallerReference        string     `xml:"CallerReference"`
	Config                 zoneConfig `xml:"Config"`
	ResourceRecordSetCount int        `xml:"ResourceRecordSetCount"`
}

func (z *hostedZone) xml() hostedZoneXML {
	return hostedZoneXML{"/hostedzone/" + z.ID, z.Name, z.CallerRf, zoneConfig{z.Comment, z.Private}, len(z.records)}
}

type changeInfo struct {
	ID          string `xml:"Id"`
	Status      string `xml:"Status"`
	SubmittedAt string `xml:"SubmittedAt"`
}

type delegationSet struct {
	NameServers []string `xml:"NameServers>NameServer"`
}

func (s *Sim) changeInfo() changeInfo {
	return changeInfo{fmt.Sprintf("/change/C%012d", s.nextID()), "INSYNC", s.now().Format(isoTime)}
}

func nameServers(z *hostedZone) []string {
	return []string{"ns-1.awsdns-01.org.", "ns-2.awsdns-02.co.uk.", "ns-3.awsdns-03.com.", "ns-4.awsdns-04.net."}
}

func fqdn(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// routeRoute53 routes a Route53 REST-XML request under /2013-04-01/.
func (s *Sim) routeRoute53(q *request) (string, handler, *apiError) {
	p, ok := strings.CutPrefix(q.r.URL.Path, "/2013-04-01/")
	if !ok {
		return "Unknown", nil, errorf(http.StatusNotFound, "UnknownOperationException", "unknown API version path %s", q.r.URL.Path)
	}
	segs := strings.Split(strings.Trim(p, "/"), "/")
	m := q.r.Method
	switch {
	case len(segs) == 1 && segs[0] == "hostedzone" && m == http.MethodPost:
		return "CreateHostedZone", s.createHostedZone, nil
	case len(segs) == 1 && segs[0] == "hostedzone" && m == http.MethodGet:
		return "ListHostedZones", s.listHostedZonesByName, nil
	case len(segs) == 1 && segs[0] == "hostedzonesbyname" && m == http.MethodGet:
		return "ListHostedZonesByName", s.listHostedZonesByName, nil
	case len(segs) == 2 && segs[0] == "hostedzone" && m == http.MethodGet:
		return "GetHostedZone", s.zoneOp(segs[1], s.getHostedZone), nil
	case len(segs) == 2 && segs[0] == "hostedzone" && m == http.MethodDelete:
		return "DeleteHostedZone", s.zoneOp(segs[1], s.deleteHostedZone), nil
	case len(segs) == 3 && segs[0] == "hostedzone" && segs[2] == "rrset" && m == http.MethodPost:
		return "ChangeResourceRecordSets", s.zoneOp(segs[1], s.changeRecordSets), nil
	case len(segs) == 3 && segs[0] == "hostedzone" && segs[2] == "rrset" && m == http.MethodGet:
		return "ListResourceRecordSets", s.zoneOp(segs[1], s.listRecordSets), nil
	case len(segs) == 2 && segs[0] == "change" && m == http.MethodGet:
		return "GetChange", func(*request) (*reply, *apiError) {
			return &reply{body: struct {
				XMLName    xml.Name   `xml:"GetChangeResponse"`
				Xmlns      string     `xml:"xmlns,attr"`
				ChangeInfo changeInfo `xml:"ChangeInfo"`
			}{Xmlns: nsRoute53, ChangeInfo: changeInfo{"/change/" + segs[1], "INSYNC", s.now().Format(isoTime)}}}, nil
		}, nil
	case len(segs) == 3 && segs[0] == "tags" && segs[1] == "hostedzone" && m == http.MethodPost:
		return "ChangeTagsForResource", s.zoneOp(segs[2], s.changeZoneTags), nil
	case len(segs) == 3 && segs[0] == "tags" && segs[1] == "hostedzone" && m == http.MethodGet:
		return "ListTagsForResource", s.zoneOp(segs[2], s.listZoneTags), nil
	}
	return "Unknown", nil, errorf(http.StatusNotFound, "UnknownOperationException", "The stand-in's Route53 serves no %s %s", m, q.r.URL.Path)
}

func (s *Sim) zoneOp(id string, h func(q *request, z *hostedZone) (*reply, *apiError)) handler {
	id = strings.TrimPrefix(id, "hostedzone/")
	return func(q *request) (*reply, *apiError) {
		q.param("Id", id)
		z := s.state.zones[id]
		if z == nil || z.account != q.account() {
			return nil, errorf(http.StatusNotFound, "NoSuchHostedZone", "No hosted zone found with ID: %s", id)
		}
		return h(q, z)
	}
}

func (s *Sim) createHostedZone(q *request) (*reply, *apiError) {
	var in struct {
		Name             string `xml:"Name"`
		CallerReference  string `xml:"CallerReference"`
		HostedZoneConfig struct {
			Comment     string `xml:"Comment"`
			PrivateZone bool   `xml:"PrivateZone"`
		} `xml:"HostedZoneConfig"`
		VPC *struct {
			VPCId string `xml:"VPCId"`
		} `xml:"VPC"`
	}
	if err := xml.Unmarshal(q.body, &in); err != nil {
		return nil, errorf(http.StatusBadRequest, "InvalidInput", "Could not parse the request body: %v", err)
	}
	q.param("Name", in.Name)
	name := fqdn(in.Name)
	if !matches(`^([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)+$`, name) || len(name) > 254 {
		return nil, errorf(http.StatusBadRequest, "InvalidDomainName", "%s is not a valid domain name", in.Name)
	}
	if in.CallerReference == "" {
		return nil, errorf(http.StatusBadRequest, "InvalidInput", "1 validation error detected: Value null at 'callerReference' failed to satisfy constraint: Member must not be null")
	}
	for _, z := range s.state.zones {
		if z.account == q.account() && z.CallerRf == in.CallerReference {
			return nil, errorf(http.StatusConflict, "HostedZoneAlreadyExists", "A hosted zone has already been created with the specified caller reference.")
		}
	}
	z := &hostedZone{ID: "Z" + randomString(20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"), Name: name, CallerRf: in.CallerReference,
		Comment: in.HostedZoneConfig.Comment, Private: in.VPC != nil || in.HostedZoneConfig.PrivateZone, account: q.account()}
	ttl := int64(172800)
	soaTTL := int64(900)
	var ns []resourceRecord
	for _, n := range nameServers(z) {
		ns = append(ns, resourceRecord{n})
	}
	z.records = []*rrSet{
		{Name: name, Type: "NS", TTL: &ttl, ResourceRecords: ns},
		{Name: name, Type: "SOA", TTL: &soaTTL, ResourceRecords: []resourceRecord{{"ns-1.awsdns-01.org. awsdns-hostmaster.amazon.com. 1 7200 900 1209600 86400"}}},
	}
	s.state.zones[z.ID] = z
	q.param("Id", z.ID)
	return &reply{status: http.StatusCreated, header: map[string]string{"Location": "https://route53.amazonaws.com/2013-04-01/hostedzone/" + z.ID},
		body: struct {
			XMLName       xml.Name      `xml:"CreateHostedZoneResponse"`
			Xmlns         string        `xml:"xmlns,attr"`
			HostedZone    hostedZoneXML `xml:"HostedZone"`
			ChangeInfo    changeInfo    `xml:"ChangeInfo"`
			DelegationSet delegationSet `xml:"DelegationSet"`
		}{Xmlns: nsRoute53, HostedZone: z.xml(), ChangeInfo: s.changeInfo(), DelegationSet: delegationSet{nameServers(z)}}}, nil
}

func (s *Sim) getHostedZone(_ *request, z *hostedZone) (*reply, *apiError) {
	return &reply{body: struct {
		XMLName       xml.Name      `xml:"GetHostedZoneResponse"`
		Xmlns         string        `xml:"xmlns,attr"`
		HostedZone    hostedZoneXML `xml:"HostedZone"`
		DelegationSet delegationSet `xml:"DelegationSet"`
	}{Xmlns: nsRoute53, HostedZone: z.xml(), DelegationSet: delegationSet{nameServers(z)}}}, nil
}

func (s *Sim) deleteHostedZone(_ *request, z *hostedZone) (*reply, *apiError) {
	for _, r := range z.records {
		if r.Name != z.Name || (r.Type != "NS" && r.Type != "SOA") {
			return nil, errorf(http.StatusBadRequest, "HostedZoneNotEmpty", "The specified hosted zone contains non-required resource record sets and so cannot be deleted.")
		}
	}
	delete(s.state.zones, z.ID)
	return &reply{body: struct {
		XMLName    xml.Name   `xml:"DeleteHostedZoneResponse"`
		Xmlns      string     `xml:"xmlns,attr"`
		ChangeInfo changeInfo `xml:"ChangeInfo"`
	}{Xmlns: nsRoute53, ChangeInfo: s.changeInfo()}}, nil
}

// reversedName orders zones as Route53 does: by labels from the right.
func reversedName(n string) string {
	labels := strings.Split(strings.TrimSuffix(n, "."), ".")
	slices.Reverse(labels)
	return strings.Join(labels, ".")
}

func (s *Sim) listHostedZonesByName(q *request) (*reply, *apiError) {
	qs := q.r.URL.Query()
	dns := qs.Get("dnsname")
	maxItems := 100
	if v := qs.Get("maxitems"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, errorf(http.StatusBadRequest, "InvalidInput", "maxitems must be a positive number")
		}
		maxItems = n
	}
	var zones []*hostedZone
	for _, z := range s.state.zones {
		if z.account == q.account() {
			zones = append(zones, z)
		}
	}
	slices.SortFunc(zones, func(a, b *hostedZone) int {
		return cmp.Or(cmp.Compare(reversedName(a.Name), reversedName(b.Name)), cmp.Compare(a.ID, b.ID))
	})
	if dns != "" {
		from := reversedName(fqdn(dns))
		i := slices.IndexFunc(zones, func(z *hostedZone) bool { return reversedName(z.Name) >= from })
		if i < 0 {
			i = len(zones)
		}
		zones = zones[i:]
	}
	type out struct {
		XMLName          xml.Name        `xml:"ListHostedZonesByNameResponse"`
		Xmlns            string          `xml:"xmlns,attr"`
		HostedZones      []hostedZoneXML `xml:"HostedZones>HostedZone"`
		DNSName          string          `xml:"DNSName,omitempty"`
		IsTruncated      bool            `xml:"IsTruncated"`
		NextDNSName      string          `xml:"NextDNSName,omitempty"`
		NextHostedZoneID string          `xml:"NextHostedZoneId,omitempty"`
		MaxItems         int             `xml:"MaxItems"`
	}
	o := out{Xmlns: nsRoute53, DNSName: dns, MaxItems: maxItems}
	if q.action == "ListHostedZones" {
		o.XMLName = xml.Name{Local: "ListHostedZonesResponse"}
		o.DNSName = ""
	}
	for i, z := range zones {
		if i == maxItems {
			o.IsTruncated, o.NextDNSName, o.NextHostedZoneID = true, z.Name, z.ID
			break
		}
		o.HostedZones = append(o.HostedZones, z.xml())
	}
	return &reply{body: o}, nil
}

func (s *Sim) changeRecordSets(q *request, z *hostedZone) (*reply, *apiError) {
	var in struct {
		ChangeBatch struct {
			Changes []struct {
				Action            string `xml:"Action"`
				ResourceRecordSet rrSet  `xml:"ResourceRecordSet"`
			} `xml:"Changes>Change"`
		} `xml:"ChangeBatch"`
	}
	if err := xml.Unmarshal(q.body, &in); err != nil {
		return nil, errorf(http.StatusBadRequest, "InvalidInput", "Could not parse the request body: %v", err)
	}
	if len(in.ChangeBatch.Changes) == 0 {
		return nil, errorf(http.StatusBadRequest, "InvalidInput", "ChangeBatch must contain at least one change")
	}
	records := map[string]*rrSet{}
	for _, r := range z.records {
		records[r.key()] = r
	}
	var msgs []string
	for i, c := range in.ChangeBatch.Changes {
		r := c.ResourceRecordSet
		r.Name = fqdn(r.Name)
		q.param(fmt.Sprintf("Change.%d", i+1), c.Action+" "+r.Name+" "+r.Type)
		desc := fmt.Sprintf("resource record set [name='%s', type='%s'%s]", r.Name, r.Type, setID(r.SetIdentifier))
		if r.Name != z.Name && !strings.HasSuffix(r.Name, "."+z.Name) {
			msgs = append(msgs, fmt.Sprintf("RRSet with DNS name %s is not permitted in zone %s", r.Name, z.Name))
			continue
		}
		if r.AliasTarget == nil && (r.TTL == nil || len(r.ResourceRecords) == 0) {
			msgs = append(msgs, fmt.Sprintf("Invalid %s: TTL and ResourceRecords are required without an AliasTarget", desc))
			continue
		}
		switch c.Action {
		case "CREATE":
			if records[r.key()] != nil {
				msgs = append(msgs, fmt.Sprintf("Tried to create %s but it already exists", desc))
				continue
			}
			records[r.key()] = &r
		case "UPSERT":
			records[r.key()] = &r
		case "DELETE":
			old := records[r.key()]
			if old == nil || !sameValues(old, &r) {
				msgs = append(msgs, fmt.Sprintf("Tried to delete %s but it was not found", desc))
				continue
			}
			if r.Name == z.Name && (r.Type == "SOA" || r.Type == "NS") {
				msgs = append(msgs, fmt.Sprintf("A HostedZone must contain at least one NS record and one SOA record for the zone itself: cannot delete %s", desc))
				continue
			}
			delete(records, r.key())
		default:
			return nil, errorf(http.StatusBadRequest, "InvalidInput", "Action %q must be CREATE, DELETE or UPSERT", c.Action)
		}
	}
	if len(msgs) > 0 {
		return nil, errorf(http.StatusBadRequest, "InvalidChangeBatch", "[%s]", strings.Join(msgs, ", "))
	}
	z.records = slices.Collect(maps.Values(records))
	slices.SortFunc(z.records, func(a, b *rrSet) int {
		return cmp.Or(cmp.Compare(reversedName(a.Name), reversedName(b.Name)), cmp.Compare(a.Type, b.Type), cmp.Compare(a.SetIdentifier, b.SetIdentifier))
	})
	return &reply{body: struct {
		XMLName    xml.Name   `xml:"ChangeResourceRecordSetsResponse"`
		Xmlns      string     `xml:"xmlns,attr"`
		ChangeInfo changeInfo `xml:"ChangeInfo"`
	}{Xmlns: nsRoute53, ChangeInfo: s.changeInfo()}}, nil
}

func setID(id string) string {
	if id == "" {
		return ""
	}
	return ", set-identifier='" + id + "'"
}

func sameValues(a, b *rrSet) bool {
	if (a.TTL == nil) != (b.TTL == nil) || (a.TTL != nil && *a.TTL != *b.TTL) {
		return false
	}
	return slices.Equal(a.ResourceRecords, b.ResourceRecords) && (a.AliasTarget == nil) == (b.AliasTarget == nil)
}

func (s *Sim) listRecordSets(q *request, z *hostedZone) (*reply, *apiError) {
	qs := q.r.URL.Query()
	maxItems := 300
	if v := qs.Get("maxitems"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, errorf(http.StatusBadRequest, "InvalidInput", "maxitems must be a positive number")
		}
		maxItems = n
	}
	recs := z.records
	if name := qs.Get("name"); name != "" {
		from, typ := reversedName(fqdn(name)), qs.Get("type")
		i := slices.IndexFunc(recs, func(r *rrSet) bool {
			rn := reversedName(r.Name)
			return rn > from || (rn == from && r.Type >= typ)
		})
		if i < 0 {
			i = len(recs)
		}
		recs = recs[i:]
	}
	type out struct {
		XMLName            xml.Name `xml:"ListResourceRecordSetsResponse"`
		Xmlns              string   `xml:"xmlns,attr"`
		ResourceRecordSets []rrSet  `xml:"ResourceRecordSets>ResourceRecordSet"`
		IsTruncated        bool     `xml:"IsTruncated"`
		NextRecordName     string   `xml:"NextRecordName,omitempty"`
		NextRecordType     string   `xml:"NextRecordType,omitempty"`
		MaxItems           int      `xml:"MaxItems"`
	}
	o := out{Xmlns: nsRoute53, MaxItems: maxItems}
	for i, r := range recs {
		if i == maxItems {
			o.IsTruncated, o.NextRecordName, o.NextRecordType = true, r.Name, r.Type
			break
		}
		o.ResourceRecordSets = append(o.ResourceRecordSets, *r)
	}
	return &reply{body: o}, nil
}

func (s *Sim) changeZoneTags(q *request, z *hostedZone) (*reply, *apiError) {
	var in struct {
		AddTags       []xmlTag `xml:"AddTags>Tag"`
		RemoveTagKeys []string `xml:"RemoveTagKeys>Key"`
	}
	if err := xml.Unmarshal(q.body, &in); err != nil {
		return nil, errorf(http.StatusBadRequest, "InvalidInput", "Could not parse the request body: %v", err)
	}
	if z.tags == nil {
		z.tags = map[string]string{}
	}
	for _, t := range in.AddTags {
		z.tags[t.Key] = t.Value
	}
	for _, k := range in.RemoveTagKeys {
		delete(z.tags, k)
	}
	return &reply{body: struct {
		XMLName xml.Name `xml:"ChangeTagsForResourceResponse"`
		Xmlns   string   `xml:"xmlns,attr"`
	}{Xmlns: nsRoute53}}, nil
}

func (s *Sim) listZoneTags(_ *request, z *hostedZone) (*reply, *apiError) {
	tags := tagsXML(z.tags)
	return &reply{body: struct {
		XMLName      xml.Name `xml:"ListTagsForResourceResponse"`
		Xmlns        string   `xml:"xmlns,attr"`
		ResourceType string   `xml:"ResourceTagSet>ResourceType"`
		ResourceID   string   `xml:"ResourceTagSet>ResourceId"`
		Tags         []xmlTag `xml:"ResourceTagSet>Tags>Tag"`
	}{Xmlns: nsRoute53, ResourceType: "hostedzone", ResourceID: z.ID, Tags: tags}}, nil
}
