package gateway

import (
	"context"
	"fmt"
	"slices"
	"sort"
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
	var records []api.DNSRecord
	var runtimes []string
	for gw, err := range r.Client.Gateways().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, nil, fmt.Errorf("list gateways: %w", err)
		}
		if gw.DeletionRequestedAt != nil {
			continue
		}
		var targets []string
		for _, rs := range gw.Status.Runtimes {
			if rs.Address != "" {
				targets = append(targets, rs.Address)
			}
		}
		sort.Strings(targets)
		inZone := false
		for _, h := range gw.Spec.Hosts {
			if api.InZone(h, d.Spec.Zone) && len(targets) > 0 {
				records = append(records, api.DNSRecord{Name: h, Type: "A", Targets: targets, Gateway: gw.Name})
				inZone = true
			}
		}
		for _, rs := range gw.Status.Runtimes {
			if inZone && !slices.Contains(runtimes, rs.RuntimeID) {
				runtimes = append(runtimes, rs.RuntimeID)
			}
		}
	}
	sort.Slice(records, func(i, j int) bool { return records[i].Name < records[j].Name })
	return records, runtimes, nil
}
