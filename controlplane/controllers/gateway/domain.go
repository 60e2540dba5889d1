package gateway

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// DomainReconciler reconciles domain_names: with provider none, the zone's records are the list in its
// status, one A record per gateway host in the zone with the gateway's addresses, kept in step with
// the gateways (rechecked every RecheckInterval). A gateway's records go when it goes, before the
// external-dns support service it used can.
type DomainReconciler struct {
	// Client lists gateways.
	Client *client.Client
	// RecheckInterval is how often the records are brought in step with the gateways (default 5s).
	RecheckInterval time.Duration
}

// Reconcile lists the records of the zone's gateways.
func (r *DomainReconciler) Reconcile(ctx context.Context, d *client.DomainName) (reconcile.Result, error) {
	var records []client.DNSRecord
	for gw, err := range r.Client.Gateways().All(ctx, client.ListOptions{}) {
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("list gateways: %w", err)
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
		for _, h := range gw.Spec.Hosts {
			if client.InZone(h, d.Spec.Zone) && len(targets) > 0 {
				records = append(records, client.DNSRecord{Name: h, Type: "A", Targets: targets, Gateway: gw.Name})
			}
		}
	}
	sort.Slice(records, func(i, j int) bool { return records[i].Name < records[j].Name })
	d.Status.Records = records
	every := r.RecheckInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	return reconcile.Result{Recheck: every}, nil
}
