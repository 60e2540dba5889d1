package gateway

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	r53types "github.com/aws/aws-sdk-go-v2/service/route53/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// OwnerRecordPrefix names the TXT record that marks a record as a domain name's (as external-dns's TXT
// registry does): "_qleetos.<name>" holds "heritage=qleetos,owner=<domain name id>". A record without it
// is not QleetOS's and is never changed or deleted.
const OwnerRecordPrefix = "_qleetos."

const recordTTL = 60

func fqdn(name string) string { return strings.TrimSuffix(name, ".") + "." }

func ownerValue(id string) string { return `"heritage=qleetos,owner=` + id + `"` }

func domainOwner(d *api.DomainName) awscloud.Owner {
	return awscloud.Owner{Kind: api.KindDomainName, ID: d.ID}
}

// zoneID is a hosted zone's id without its "/hostedzone/" prefix.
func zoneID(id string) string { return strings.TrimPrefix(id, "/hostedzone/") }

// findZone returns the public hosted zone named zone, if any.
func findZone(ctx context.Context, svc awscloud.Route53, zone string) (*r53types.HostedZone, error) {
	out, err := svc.ListHostedZonesByName(ctx, &route53.ListHostedZonesByNameInput{DNSName: sdkaws.String(fqdn(zone))})
	if err != nil {
		return nil, awscloud.Outcome(fmt.Errorf("find Route53 hosted zone %s: %w", zone, awscloud.Classify(err)))
	}
	for i, z := range out.HostedZones {
		if strings.EqualFold(sdkaws.ToString(z.Name), fqdn(zone)) && (z.Config == nil || !z.Config.PrivateZone) {
			return &out.HostedZones[i], nil
		}
	}
	return nil, nil
}

// zoneTags returns a hosted zone's tags.
func zoneTags(ctx context.Context, svc awscloud.Route53, id string) (map[string]string, error) {
	out, err := svc.ListTagsForResource(ctx, &route53.ListTagsForResourceInput{ResourceType: r53types.TagResourceTypeHostedzone, ResourceId: sdkaws.String(zoneID(id))})
	if err != nil {
		return nil, awscloud.Outcome(fmt.Errorf("read the tags of Route53 hosted zone %s: %w", id, awscloud.Classify(err)))
	}
	m := map[string]string{}
	if out.ResourceTagSet != nil {
		for _, t := range out.ResourceTagSet.Tags {
			m[sdkaws.ToString(t.Key)] = sdkaws.ToString(t.Value)
		}
	}
	return m, nil
}

func tagZone(ctx context.Context, svc awscloud.Route53, id string, o awscloud.Owner) error {
	var tags []r53types.Tag
	for _, k := range []string{awscloud.TagOwnerKind, awscloud.TagOwnerID, awscloud.TagManagedBy} {
		tags = append(tags, r53types.Tag{Key: sdkaws.String(k), Value: sdkaws.String(o.Tags()[k])})
	}
	if _, err := svc.ChangeTagsForResource(ctx, &route53.ChangeTagsForResourceInput{ResourceType: r53types.TagResourceTypeHostedzone,
		ResourceId: sdkaws.String(zoneID(id)), AddTags: tags}); err != nil {
		return awscloud.Outcome(fmt.Errorf("tag Route53 hosted zone %s: %w", id, awscloud.Classify(err)))
	}
	return nil
}

// ensureZone finds the domain name's hosted zone by name, or creates it (tagged with the domain name's
// ownership, so that only a zone QleetOS created is ever deleted). A zone found untagged whose caller
// reference is the domain name's id is one whose creation was interrupted before its tags: it is tagged.
func ensureZone(ctx context.Context, svc awscloud.Route53, d *api.DomainName) (string, error) {
	z, err := findZone(ctx, svc, d.Spec.Zone)
	if err != nil {
		return "", err
	}
	if z != nil {
		if sdkaws.ToString(z.CallerReference) == d.ID {
			tags, err := zoneTags(ctx, svc, sdkaws.ToString(z.Id))
			if err != nil {
				return "", err
			}
			if !domainOwner(d).Owns(tags) {
				if err := tagZone(ctx, svc, sdkaws.ToString(z.Id), domainOwner(d)); err != nil {
					return "", err
				}
			}
		}
		return sdkaws.ToString(z.Id), nil
	}
	out, err := svc.CreateHostedZone(ctx, &route53.CreateHostedZoneInput{Name: sdkaws.String(d.Spec.Zone), CallerReference: sdkaws.String(d.ID),
		HostedZoneConfig: &r53types.HostedZoneConfig{Comment: sdkaws.String("QleetOS: domain_name " + d.Name)}})
	if err != nil {
		return "", awscloud.Outcome(fmt.Errorf("create Route53 hosted zone %s: %w", d.Spec.Zone, awscloud.Classify(err)))
	}
	id := sdkaws.ToString(out.HostedZone.Id)
	if err := tagZone(ctx, svc, id, domainOwner(d)); err != nil {
		return "", err
	}
	reconcile.Eventf(ctx, api.EventNormal, "HostedZoneCreated", "created Route53 hosted zone %s (%s)", d.Spec.Zone, zoneID(id))
	return id, nil
}

// recordSets lists every record set of a hosted zone.
func recordSets(ctx context.Context, svc awscloud.Route53, id string) ([]r53types.ResourceRecordSet, error) {
	var out []r53types.ResourceRecordSet
	in := &route53.ListResourceRecordSetsInput{HostedZoneId: sdkaws.String(id)}
	for {
		page, err := svc.ListResourceRecordSets(ctx, in)
		if err != nil {
			return nil, awscloud.Outcome(fmt.Errorf("list the records of Route53 hosted zone %s: %w", id, awscloud.Classify(err)))
		}
		out = append(out, page.ResourceRecordSets...)
		if !page.IsTruncated {
			return out, nil
		}
		in.StartRecordName, in.StartRecordType, in.StartRecordIdentifier = page.NextRecordName, page.NextRecordType, page.NextRecordIdentifier
	}
}

// recordSet is the Route53 record of a gateway host: A for addresses, CNAME for a load balancer's name.
func recordSet(r api.DNSRecord) r53types.ResourceRecordSet {
	typ, values := r53types.RRTypeA, r.Targets
	if slices.ContainsFunc(r.Targets, func(t string) bool { return net.ParseIP(t) == nil }) {
		typ, values = r53types.RRTypeCname, r.Targets[:1]
	}
	rs := r53types.ResourceRecordSet{Name: sdkaws.String(fqdn(r.Name)), Type: typ, TTL: sdkaws.Int64(recordTTL)}
	for _, v := range values {
		rs.ResourceRecords = append(rs.ResourceRecords, r53types.ResourceRecord{Value: sdkaws.String(v)})
	}
	return rs
}

func sameRecordSet(a, b r53types.ResourceRecordSet) bool {
	values := func(rs r53types.ResourceRecordSet) []string {
		var v []string
		for _, r := range rs.ResourceRecords {
			v = append(v, sdkaws.ToString(r.Value))
		}
		slices.Sort(v)
		return v
	}
	return a.Type == b.Type && sdkaws.ToInt64(a.TTL) == sdkaws.ToInt64(b.TTL) && slices.Equal(values(a), values(b))
}

// syncRecords makes the hosted zone hold the wanted records (nil: none), each with its ownership TXT
// record, in one change batch: UPSERT what is missing or different, DELETE what the domain name wrote
// and no longer wants. A name that holds a record that is not the domain name's is left unchanged; it
// is returned as a conflict.
func syncRecords(ctx context.Context, svc awscloud.Route53, zone, owner string, wanted []api.DNSRecord) (conflicts []string, err error) {
	sets, err := recordSets(ctx, svc, zone)
	if err != nil {
		return nil, err
	}
	ours := map[string]r53types.ResourceRecordSet{}   // ownership TXT by record name
	held := map[string][]r53types.ResourceRecordSet{} // A and CNAME by name
	for _, rs := range sets {
		name := strings.ToLower(sdkaws.ToString(rs.Name))
		switch {
		case rs.Type == r53types.RRTypeTxt && strings.HasPrefix(name, OwnerRecordPrefix):
			if len(rs.ResourceRecords) == 1 && sdkaws.ToString(rs.ResourceRecords[0].Value) == ownerValue(owner) {
				ours[strings.TrimPrefix(name, OwnerRecordPrefix)] = rs
			}
		case rs.Type == r53types.RRTypeA || rs.Type == r53types.RRTypeCname || rs.Type == r53types.RRTypeAaaa:
			held[name] = append(held[name], rs)
		}
	}
	var changes []r53types.Change
	change := func(a r53types.ChangeAction, rs r53types.ResourceRecordSet) {
		changes = append(changes, r53types.Change{Action: a, ResourceRecordSet: &rs})
	}
	want := map[string]bool{}
	for _, r := range wanted {
		rs := recordSet(r)
		name := strings.ToLower(sdkaws.ToString(rs.Name))
		want[name] = true
		_, mine := ours[name]
		if !mine && len(held[name]) > 0 {
			conflicts = append(conflicts, r.Name)
			continue
		}
		if !mine {
			change(r53types.ChangeActionUpsert, r53types.ResourceRecordSet{Name: sdkaws.String(OwnerRecordPrefix + name), Type: r53types.RRTypeTxt,
				TTL: sdkaws.Int64(recordTTL), ResourceRecords: []r53types.ResourceRecord{{Value: sdkaws.String(ownerValue(owner))}}})
		}
		for _, old := range held[name] {
			if old.Type != rs.Type { // A <-> CNAME: the old type goes
				change(r53types.ChangeActionDelete, old)
			}
		}
		if i := slices.IndexFunc(held[name], func(o r53types.ResourceRecordSet) bool { return o.Type == rs.Type }); i < 0 || !sameRecordSet(held[name][i], rs) {
			change(r53types.ChangeActionUpsert, rs)
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range ours {
			if !yield(n) {
				return
			}
		}
	}) {
		if want[name] {
			continue
		}
		for _, old := range held[name] {
			change(r53types.ChangeActionDelete, old)
		}
		change(r53types.ChangeActionDelete, ours[name])
	}
	if len(changes) == 0 {
		return conflicts, nil
	}
	if _, err := svc.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{HostedZoneId: sdkaws.String(zone),
		ChangeBatch: &r53types.ChangeBatch{Comment: sdkaws.String("QleetOS: domain_name " + owner), Changes: changes}}); err != nil {
		return conflicts, awscloud.Outcome(fmt.Errorf("change the records of Route53 hosted zone %s: %w", zone, awscloud.Classify(err)))
	}
	return conflicts, nil
}

// route53Accounts are the cloud accounts of the eks runtimes among runtimes.
func (r *DomainReconciler) route53Accounts(ctx context.Context, runtimes []string) ([]string, error) {
	var ids []string
	for _, id := range runtimes {
		rt, err := r.Client.KubernetesRuntimes().Get(ctx, id)
		if api.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get kubernetes_runtime: %w", err)
		}
		if rt.Spec.Provider == api.ProviderEKS && rt.Spec.CloudAccountID != "" && !slices.Contains(ids, rt.Spec.CloudAccountID) {
			ids = append(ids, rt.Spec.CloudAccountID)
		}
	}
	return ids, nil
}

// allAccounts are every AWS cloud account: where records written earlier may be, once no gateway says.
func (r *DomainReconciler) allAccounts(ctx context.Context) ([]string, error) {
	var ids []string
	for ca, err := range r.Client.CloudAccounts().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list cloud_accounts: %w", err)
		}
		if ca.Spec.Provider == api.CloudAWS {
			ids = append(ids, ca.ID)
		}
	}
	return ids, nil
}

// syncRoute53 writes the records to the zone's hosted zone (made when absent) in the cloud account of
// the eks runtimes the zone's gateways run on. QleetOS writes them itself, through the same Route53
// calls external-dns would make: the records are there as soon as the gateways have addresses, whether
// or not an external-dns runs in the cluster. With no gateway on an eks runtime, records written before
// (hadRecords) are looked for in every AWS cloud account and taken out.
func (r *DomainReconciler) syncRoute53(ctx context.Context, d *api.DomainName, records []api.DNSRecord, runtimes []string, hadRecords bool) error {
	if r.Accounts == nil {
		return reconcile.Terminal(fmt.Errorf("provider route53 is not available: this control plane has no AWS access"))
	}
	accounts, err := r.route53Accounts(ctx, runtimes)
	if err != nil {
		return err
	}
	switch {
	case len(accounts) > 1:
		return reconcile.Terminal(fmt.Errorf("the zone's gateways run on eks runtimes of %d cloud accounts; a Route53 zone is in one", len(accounts)))
	case len(accounts) == 0 && hadRecords:
		return r.removeRoute53Records(ctx, d)
	case len(accounts) == 0:
		d.Status.Message = "route53: no gateway of the zone runs on an eks runtime yet"
		return nil
	}
	cls, _, err := r.Accounts.Clients(ctx, accounts[0], "")
	if err != nil {
		return err
	}
	zone, err := ensureZone(ctx, cls.Route53, d)
	if err != nil {
		return err
	}
	conflicts, err := syncRecords(ctx, cls.Route53, zone, d.ID, records)
	if err != nil {
		return err
	}
	d.Status.Message = ""
	if len(conflicts) > 0 {
		d.Status.Message = fmt.Sprintf("route53: %s already hold records that QleetOS did not write; they were left unchanged", strings.Join(conflicts, ", "))
	}
	return nil
}

// removeRoute53Records takes the domain name's records out of its zone in every AWS cloud account.
func (r *DomainReconciler) removeRoute53Records(ctx context.Context, d *api.DomainName) error {
	_, err := r.eachZone(ctx, d, nil, func(svc awscloud.Route53, id string) error {
		_, err := syncRecords(ctx, svc, id, d.ID, nil)
		return err
	})
	return err
}

// eachZone calls f with the domain name's hosted zone in each of accounts (every AWS cloud account
// when empty) that has one.
func (r *DomainReconciler) eachZone(ctx context.Context, d *api.DomainName, accounts []string, f func(svc awscloud.Route53, zone string) error) (int, error) {
	if r.Accounts == nil {
		return 0, nil
	}
	if len(accounts) == 0 {
		var err error
		if accounts, err = r.allAccounts(ctx); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, id := range accounts {
		cls, _, err := r.Accounts.Clients(ctx, id, "")
		if err != nil {
			continue // an account that is not Ready holds nothing QleetOS wrote
		}
		z, err := findZone(ctx, cls.Route53, d.Spec.Zone)
		if err != nil {
			return n, err
		}
		if z == nil {
			continue
		}
		n++
		if err := f(cls.Route53, sdkaws.ToString(z.Id)); err != nil {
			return n, err
		}
	}
	return n, nil
}

// removeRoute53 takes the domain name's records out and deletes the hosted zone when QleetOS created it
// for this domain name (its tags) and it holds nothing else; a zone with other records is left, with a
// warning.
func (r *DomainReconciler) removeRoute53(ctx context.Context, d *api.DomainName, runtimes []string) error {
	accounts, err := r.route53Accounts(ctx, runtimes)
	if err != nil {
		return err
	}
	_, err = r.eachZone(ctx, d, accounts, func(svc awscloud.Route53, id string) error {
		if _, err := syncRecords(ctx, svc, id, d.ID, nil); err != nil {
			return err
		}
		tags, err := zoneTags(ctx, svc, id)
		if err != nil || !domainOwner(d).Owns(tags) {
			return err
		}
		_, err = svc.DeleteHostedZone(ctx, &route53.DeleteHostedZoneInput{Id: sdkaws.String(zoneID(id))})
		switch {
		case awscloud.IsCode(err, "HostedZoneNotEmpty"):
			reconcile.Eventf(ctx, api.EventWarning, "LeftAlone", "Route53 hosted zone %s holds records QleetOS did not write; it was kept", d.Spec.Zone)
		case err != nil && !awscloud.IsNotFound(err):
			return awscloud.Outcome(fmt.Errorf("delete Route53 hosted zone %s: %w", d.Spec.Zone, awscloud.Classify(err)))
		}
		return nil
	})
	return err
}
