package gateway_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	r53types "github.com/aws/aws-sdk-go-v2/service/route53/types"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/gateway"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

// TestRoute53Records: a route53 domain name whose gateway runs on an eks runtime gets its hosted zone
// (created, tagged) and the gateway's A record with its ownership TXT record in the stand-in's Route53;
// a record QleetOS did not write is never changed or deleted, even where a gateway wants that name; the
// gateway's records go when it goes, and the zone QleetOS created goes with the domain name once
// nothing else is in it.
func TestRoute53Records(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sim := awssim.New(awssim.Config{})
	require.NoError(t, sim.Start(ctx))
	t.Cleanup(func() { _ = sim.Stop(context.Background()) })
	acct, err := sim.AddAccount("")
	require.NoError(t, err)
	svc := apitest.Start(t)
	admin, ctrl := svc.Client(t, server.RoleAdmin), svc.Client(t, server.RoleController)

	ca, err := admin.CloudAccounts().Create(ctx, &api.CloudAccount{Meta: api.Meta{Name: "aws"}, Spec: api.CloudAccountSpec{
		Provider: api.CloudAWS, Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}})
	require.NoError(t, err)
	ca.Status.Phase, ca.Status.ObservedGeneration, ca.Status.AccountID = api.PhaseReady, ca.Generation, acct.ID
	_, err = ctrl.CloudAccounts().UpdateStatus(ctx, ca.ID, ca.ResourceVersion, ca.Status)
	require.NoError(t, err)
	rt, err := admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "prod"}, Spec: api.KubernetesRuntimeSpec{
		Provider: api.ProviderEKS, Region: "us-east-1", CloudAccountID: ca.ID, Nodes: 1}})
	require.NoError(t, err)
	def, err := admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 80}}}}}})
	require.NoError(t, err)
	inst, err := admin.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "shop"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	newGateway := func(name string, hosts ...string) *api.Gateway {
		gw, err := admin.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: name}, Spec: api.GatewaySpec{InstanceID: inst.ID, Hosts: hosts}})
		require.NoError(t, err)
		gw.Status.Runtimes = []api.GatewayRuntimeStatus{{RuntimeID: rt.ID, Runtime: rt.Name, Address: "203.0.113.7", Phase: api.PhaseReady}}
		gw.Status.ObservedGeneration = gw.Generation
		_, err = ctrl.Gateways().UpdateStatus(ctx, gw.ID, gw.ResourceVersion, gw.Status)
		require.NoError(t, err)
		return gw
	}
	web := newGateway("web", "app.example.test")

	dn, err := admin.DomainNames().Create(ctx, &api.DomainName{Meta: api.Meta{Name: "example"}, Spec: api.DomainNameSpec{Zone: "example.test", Provider: api.DNSProviderRoute53}})
	require.NoError(t, err)
	rec := &gateway.DomainReconciler{Client: ctrl, Accounts: &awscloud.Accounts{Client: ctrl}}
	reconcileOnce := func() *api.DomainName {
		t.Helper()
		d, err := ctrl.DomainNames().Get(ctx, dn.ID)
		require.NoError(t, err)
		_, err = rec.Reconcile(ctx, d)
		require.NoError(t, err)
		d.Status.ObservedGeneration = d.Generation
		_, err = ctrl.DomainNames().UpdateStatus(ctx, d.ID, d.ResourceVersion, d.Status)
		require.NoError(t, err)
		return d
	}

	r53, err := awscloud.Account{Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}.Connect(ctx, "")
	require.NoError(t, err)
	records := func(zone string) map[string]string {
		out, err := r53.Route53.ListResourceRecordSets(ctx, &route53.ListResourceRecordSetsInput{HostedZoneId: &zone})
		require.NoError(t, err)
		m := map[string]string{}
		for _, rs := range out.ResourceRecordSets {
			if rs.Type == r53types.RRTypeSoa || rs.Type == r53types.RRTypeNs {
				continue
			}
			var v []string
			for _, r := range rs.ResourceRecords {
				v = append(v, sdkaws.ToString(r.Value))
			}
			m[string(rs.Type)+" "+sdkaws.ToString(rs.Name)] = strings.Join(v, ",")
		}
		return m
	}

	sim.ResetCalls()
	d := reconcileOnce()
	require.Empty(t, d.Status.Message)
	require.Len(t, d.Status.Records, 1)
	var mutations []string
	for _, c := range sim.Calls() {
		if c.Service == "route53" && c.Error == "" && !strings.HasPrefix(c.Action, "List") && !strings.HasPrefix(c.Action, "Get") {
			mutations = append(mutations, c.Action)
		}
	}
	require.Equal(t, []string{"CreateHostedZone", "ChangeTagsForResource", "ChangeResourceRecordSets"}, mutations)
	var zone string
	for _, r := range sim.Resources() {
		if r.Type == "hosted-zone" || r.Service == "route53" {
			zone = r.ID
			require.Equal(t, dn.ID, r.Tags[awscloud.TagOwnerID], "the zone QleetOS made carries the domain name's ownership")
		}
	}
	require.NotEmpty(t, zone)
	require.Equal(t, map[string]string{
		"A app.example.test.":            "203.0.113.7",
		"TXT _qleetos.app.example.test.": `"heritage=qleetos,owner=` + dn.ID + `"`,
	}, records(zone))

	// Records QleetOS did not write: one elsewhere in the zone, one on a name a gateway then wants.
	_, err = r53.Route53.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{HostedZoneId: &zone, ChangeBatch: &r53types.ChangeBatch{Changes: []r53types.Change{
		{Action: r53types.ChangeActionCreate, ResourceRecordSet: &r53types.ResourceRecordSet{Name: sdkaws.String("mail.example.test"), Type: r53types.RRTypeA, TTL: sdkaws.Int64(300),
			ResourceRecords: []r53types.ResourceRecord{{Value: sdkaws.String("198.51.100.1")}}}},
		{Action: r53types.ChangeActionCreate, ResourceRecordSet: &r53types.ResourceRecordSet{Name: sdkaws.String("taken.example.test"), Type: r53types.RRTypeA, TTL: sdkaws.Int64(300),
			ResourceRecords: []r53types.ResourceRecord{{Value: sdkaws.String("198.51.100.2")}}}},
	}}})
	require.NoError(t, err)
	other := newGateway("other", "taken.example.test")
	sim.ResetCalls()
	d = reconcileOnce()
	require.Contains(t, d.Status.Message, "taken.example.test already hold records that QleetOS did not write")
	require.Equal(t, "198.51.100.2", records(zone)["A taken.example.test."], "a foreign record is not overwritten")
	require.Empty(t, awssim.Filter(sim.Calls(), "route53", "ChangeResourceRecordSets"), "nothing to change")
	require.NoError(t, admin.Gateways().Delete(ctx, other.ID, client.DeleteOptions{}))

	// The gateway goes: its records go, the foreign ones stay.
	require.NoError(t, admin.Gateways().Delete(ctx, web.ID, client.DeleteOptions{}))
	d = reconcileOnce()
	require.Empty(t, d.Status.Records)
	require.Equal(t, map[string]string{"A mail.example.test.": "198.51.100.1", "A taken.example.test.": "198.51.100.2"}, records(zone))

	// Deleting the domain name keeps a zone that still holds records QleetOS did not write...
	_, err = rec.Finalize(ctx, d)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(sim.Resources(), func(r awssim.Resource) bool { return r.ID == zone }), "the zone with foreign records is kept")
	// ...and deletes it once they are gone.
	_, err = r53.Route53.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{HostedZoneId: &zone, ChangeBatch: &r53types.ChangeBatch{Changes: []r53types.Change{
		{Action: r53types.ChangeActionDelete, ResourceRecordSet: &r53types.ResourceRecordSet{Name: sdkaws.String("mail.example.test."), Type: r53types.RRTypeA, TTL: sdkaws.Int64(300),
			ResourceRecords: []r53types.ResourceRecord{{Value: sdkaws.String("198.51.100.1")}}}},
		{Action: r53types.ChangeActionDelete, ResourceRecordSet: &r53types.ResourceRecordSet{Name: sdkaws.String("taken.example.test."), Type: r53types.RRTypeA, TTL: sdkaws.Int64(300),
			ResourceRecords: []r53types.ResourceRecord{{Value: sdkaws.String("198.51.100.2")}}}},
	}}})
	require.NoError(t, err)
	_, err = rec.Finalize(ctx, d)
	require.NoError(t, err)
	require.Empty(t, sim.Resources(), "the zone QleetOS created goes with the domain name")
}
