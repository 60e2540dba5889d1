package gateway

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// TestZoneRecordsListEachNameOnce: a host that two gateways serve (each on its own paths), or that is
// spelt twice, is one record with every address, naming both gateways; a record says A or CNAME as Route53
// is written; hosts outside the zone and gateways without an address make none.
func TestZoneRecordsListEachNameOnce(t *testing.T) {
	t.Parallel()
	gw := func(name string, hosts []string, addrs ...string) *api.Gateway {
		g := &api.Gateway{Meta: api.Meta{Name: name}, Spec: api.GatewaySpec{Hosts: hosts}}
		for _, a := range addrs {
			g.Status.Runtimes = append(g.Status.Runtimes, api.GatewayRuntimeStatus{Address: a})
		}
		return g
	}
	got := zoneRecords("example.com", []*api.Gateway{
		gw("web", []string{"app.example.com", "www.example.com"}, "10.0.0.2"),
		gw("api", []string{"app.example.com", "other.org"}, "10.0.0.1", "10.0.0.2"),
		gw("legacy", []string{"APP.example.com."}, "10.0.0.3"),
		gw("pending", []string{"new.example.com"}),
		gw("aws", []string{"lb.example.com"}, "b.elb.amazonaws.com", "a.elb.amazonaws.com"),
	})
	require.Equal(t, []api.DNSRecord{
		{Name: "app.example.com", Type: "A", Targets: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, Gateway: "api, legacy, web"},
		{Name: "lb.example.com", Type: "CNAME", Targets: []string{"a.elb.amazonaws.com"}, Gateway: "aws"},
		{Name: "www.example.com", Type: "A", Targets: []string{"10.0.0.2"}, Gateway: "web"},
	}, got)
	// What is written to Route53 is what the status lists.
	for _, r := range got {
		rs := recordSet(r)
		require.EqualValues(t, r.Type, rs.Type, r.Name)
		require.Len(t, rs.ResourceRecords, len(r.Targets), r.Name)
	}
}
