package gateway

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// DomainReconciler reconciles domain_names: the zone's records are the list in its status, one A record
// per gateway host in the zone with the gateway's addresses, kept in step with the gateways: a gateway
// whose records change notifies the domain names it was and is in (and its deletion does, through its
// status references). A gateway with a host in the zone that does not list the domain name yet (the
// domain name is new) is notified, so that it installs external-dns. A gateway's records go when it
// goes, before the external-dns support service it used can. With provider route53 the records are
// also written to the zone's Route53 hosted zone, in the cloud account of the eks runtimes the zone's
// gateways run on (see syncRoute53), and checked against it every RecheckInterval.
type DomainReconciler struct {
	// Client lists gateways and reads runtimes (a controller token).
	Client *client.Client
	// Accounts gives the cloud accounts' AWS clients; provider route53 needs it.
	Accounts *awscloud.Accounts
	// RecheckInterval is how often, with provider route53, the records are checked against the hosted
	// zone, where a record changed by hand is put back (default 1m): Route53 tells nobody of a change.
	// Provider none is not looked at on a timer.
	RecheckInterval time.Duration
}

// Reconcile lists the records of the zone's gateways, and writes them to Route53 for provider route53.
func (r *DomainReconciler) Reconcile(ctx context.Context, d *api.DomainName) (reconcile.Result, error) {
	records, runtimes, unaware, err := r.records(ctx, d)
	if err != nil {
		return reconcile.Result{}, err
	}
	res := reconcile.Result{Notify: unaware}
	if d.Spec.Provider == api.DNSProviderRoute53 {
		if err := r.syncRoute53(ctx, d, records, runtimes, len(d.Status.Records) > 0); err != nil {
			return res, err
		}
		res.Recheck = cmp.Or(r.RecheckInterval, time.Minute)
	}
	d.Status.Records = records
	return res, nil
}

// Finalize takes the domain name's records out of Route53, and deletes the hosted zone if QleetOS
// created it for this domain name and nothing else is left in it.
func (r *DomainReconciler) Finalize(ctx context.Context, d *api.DomainName) (reconcile.Result, error) {
	if d.Spec.Provider != api.DNSProviderRoute53 || d.DeletionOrphan {
		return reconcile.Result{}, nil
	}
	_, runtimes, _, err := r.records(ctx, d)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.removeRoute53(ctx, d, runtimes)
}

// records are the zone's gateways' records, the runtimes they run on, and the gateways with a host in
// the zone that do not list the domain name yet.
func (r *DomainReconciler) records(ctx context.Context, d *api.DomainName) ([]api.DNSRecord, []string, []api.ObjectRef, error) {
	var gateways []*api.Gateway
	var runtimes []string
	var unaware []api.ObjectRef
	for gw, err := range r.Client.Gateways().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, nil, nil, fmt.Errorf("list gateways: %w", err)
		}
		if gw.DeletionRequestedAt != nil {
			continue
		}
		gateways = append(gateways, gw)
		if slices.ContainsFunc(gw.Spec.Hosts, func(h string) bool { return api.InZone(h, d.Spec.Zone) }) &&
			!slices.ContainsFunc(gw.Status.DomainNames, func(ref api.ObjectRef) bool { return ref.ID == d.ID }) {
			unaware = append(unaware, api.ObjectRef{Kind: api.KindGateway, ID: gw.ID, Name: gw.Name})
		}
		if len(zoneRecords(d.Spec.Zone, []*api.Gateway{gw})) == 0 {
			continue
		}
		for _, rs := range gw.Status.Runtimes {
			if !slices.Contains(runtimes, rs.RuntimeID) {
				runtimes = append(runtimes, rs.RuntimeID)
			}
		}
	}
	return zoneRecords(d.Spec.Zone, gateways), runtimes, unaware, nil
}

// zoneRecords are the records of the zone: one per host name that a gateway with an address serves in it,
// however many gateways serve it (each on its own paths) and however its name is spelt (case, a final
// dot), with every address of those gateways. A record says what it is: A when every address is an IP,
// else CNAME to the first load balancer name, as Route53 is written (recordSet).
func zoneRecords(zone string, gateways []*api.Gateway) []api.DNSRecord {
	byName := map[string]*api.DNSRecord{}
	var names []string
	for _, gw := range gateways {
		var targets []string
		for _, rs := range gw.Status.Runtimes {
			if rs.Address != "" {
				targets = append(targets, rs.Address)
			}
		}
		if len(targets) == 0 {
			continue
		}
		for _, h := range gw.Spec.Hosts {
			if !api.InZone(h, zone) {
				continue
			}
			name := strings.TrimSuffix(strings.ToLower(h), ".")
			rec := byName[name]
			if rec == nil {
				rec = &api.DNSRecord{Name: name}
				byName[name] = rec
				names = append(names, name)
			}
			for _, t := range targets {
				if !slices.Contains(rec.Targets, t) {
					rec.Targets = append(rec.Targets, t)
				}
			}
			if !slices.Contains(strings.Split(rec.Gateway, ", "), gw.Name) {
				rec.Gateway = strings.TrimPrefix(rec.Gateway+", "+gw.Name, ", ")
			}
		}
	}
	sort.Strings(names)
	out := make([]api.DNSRecord, 0, len(names))
	for _, n := range names {
		rec := byName[n]
		sort.Strings(rec.Targets)
		gws := strings.Split(rec.Gateway, ", ")
		sort.Strings(gws)
		rec.Gateway = strings.Join(gws, ", ")
		rec.Type = "A"
		if slices.ContainsFunc(rec.Targets, func(t string) bool { return net.ParseIP(t) == nil }) {
			rec.Type, rec.Targets = "CNAME", rec.Targets[:1]
		}
		out = append(out, *rec)
	}
	return out
}
