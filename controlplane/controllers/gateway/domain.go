package gateway

import (
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
// per gateway host in the zone with the gateway's addresses, kept in step with the gateways (rechecked
// every RecheckInterval). A gateway's records go when it goes, before the external-dns support service
// it used can. With provider route53 the records are also written to the zone's Route53 hosted zone, in
// the cloud account of the eks runtimes the zone's gateways run on (see syncRoute53).
type DomainReconciler struct {
	// Client lists gateways and reads runtimes (a controller token).
	Client *client.Client
	// Accounts gives the cloud accounts' AWS clients; provider route53 needs it.
	Accounts *awscloud.Accounts
	// RecheckInterval is how often the records are brought in step with the gateways (default 5s).
	RecheckInterval time.Duration
}

// Reconcile lists the records of the zone's gateways, and writes them to Route53 for provider route53.
func (r *DomainReconciler) Reconcile(ctx context.Context, d *api.DomainName) (reconcile.Result, error) {
	records, runtimes, err := r.records(ctx, d)
	if err != nil {
		return reconcile.Result{}, err
	}
	if d.Spec.Provider == api.DNSProviderRoute53 {
		if err := r.syncRoute53(ctx, d, records, runtimes, len(d.Status.Records) > 0); err != nil {
			return reconcile.Result{}, err
		}
	}
	d.Status.Records = records
	every := r.RecheckInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	return reconcile.Result{Recheck: every}, nil
}

// Finalize takes the domain name's records out of Route53, and deletes the hosted zone if QleetOS
// created it for this domain name and nothing else is left in it.
func (r *DomainReconciler) Finalize(ctx context.Context, d *api.DomainName) (reconcile.Result, error) {
	if d.Spec.Provider != api.DNSProviderRoute53 || d.DeletionOrphan {
		return reconcile.Result{}, nil
	}
	_, runtimes, err := r.records(ctx, d)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.removeRoute53(ctx, d, runtimes)
}

// records are the zone's gateways' records, and the runtimes they run on.
func (r *DomainReconciler) records(ctx context.Context, d *api.DomainName) ([]api.DNSRecord, []string, error) {
	var gateways []*api.Gateway
	var runtimes []string
	for gw, err := range r.Client.Gateways().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, nil, fmt.Errorf("list gateways: %w", err)
		}
		if gw.DeletionRequestedAt != nil {
			continue
		}
		gateways = append(gateways, gw)
		if len(zoneRecords(d.Spec.Zone, []*api.Gateway{gw})) == 0 {
			continue
		}
		for _, rs := range gw.Status.Runtimes {
			if !slices.Contains(runtimes, rs.RuntimeID) {
				runtimes = append(runtimes, rs.RuntimeID)
			}
		}
	}
	return zoneRecords(d.Spec.Zone, gateways), runtimes, nil
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
