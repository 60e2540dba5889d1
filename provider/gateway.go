package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// gatewayModel is qleet_gateway.
type gatewayModel struct {
	objectMeta
	InstanceID   types.String `tfsdk:"instance_id"`
	Hosts        types.List   `tfsdk:"hosts"`
	Paths        types.List   `tfsdk:"paths"`
	Port         types.Int64  `tfsdk:"port"`
	TLS          types.Bool   `tfsdk:"tls"`
	RedirectHTTP types.Bool   `tfsdk:"redirect_http"`
}

var gatewayRuntimeAttributes = map[string]rschema.Attribute{
	"runtime_id":         rschema.StringAttribute{Description: "The runtime's ID.", Computed: true},
	"runtime":            rschema.StringAttribute{Description: "The runtime's name.", Computed: true},
	"address":            rschema.StringAttribute{Description: "The load-balancer address of the route there.", Computed: true},
	"url":                rschema.StringAttribute{Description: "Where the instance is reached there.", Computed: true},
	"certificate_ready":  rschema.BoolAttribute{Description: "Whether the TLS certificate is issued.", Computed: true},
	"certificate_expiry": rschema.StringAttribute{Description: "When the certificate expires (RFC 3339).", Computed: true},
	"phase":              rschema.StringAttribute{Description: "Pending, Reconciling, Ready or Failed.", Computed: true},
	"message":            rschema.StringAttribute{Description: "Why the route there is not Ready.", Computed: true},
}

var gatewayRuntimeType = objectTypeOf(gatewayRuntimeAttributes)

var gatewayKind = &kind[api.GatewaySpec, api.GatewayStatus, gatewayModel]{
	name: api.KindGateway,
	api:  (*client.Client).Gateways,
	attributes: map[string]rschema.Attribute{
		"instance_id": rschema.StringAttribute{
			Description: "The ID of the qleet_workload_instance to route to (its Service, named after the instance).",
			Required:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"hosts": rschema.ListAttribute{
			Description: "Host names it serves, e.g. `[\"app.example.com\"]`; none serves any host, without TLS.",
			Optional:    true,
			ElementType: types.StringType,
			Validators:  []validator.List{listvalidator.UniqueValues(), listvalidator.SizeAtMost(16)},
		},
		"paths": rschema.ListAttribute{
			Description: "URL path prefixes routed to the instance (the API defaults to `[\"/\"]`).",
			Optional:    true,
			Computed:    true,
			ElementType: types.StringType,
		},
		"port": rschema.Int64Attribute{
			Description: "The Service port to route to (default: the definition's first container port).",
			Optional:    true,
			Validators:  []validator.Int64{int64validator.Between(1, 65535)},
		},
		"tls": rschema.BoolAttribute{
			Description: "Terminate TLS with a certificate for the hosts (default: true when a host is set).",
			Optional:    true,
		},
		"redirect_http": rschema.BoolAttribute{
			Description: "Redirect HTTP to HTTPS when TLS is on (default true).",
			Optional:    true,
		},
	},
	statusAttributes: map[string]rschema.Attribute{
		"url": rschema.StringAttribute{Description: "The gateway's URL: its first host's (https with TLS), else the first runtime's address.", Computed: true},
		"runtimes": rschema.ListNestedAttribute{
			Description:  "The route on each runtime the instance is placed on.",
			Computed:     true,
			NestedObject: rschema.NestedAttributeObject{Attributes: gatewayRuntimeAttributes},
		},
	},
	toSpec: func(ctx context.Context, m *gatewayModel) (api.GatewaySpec, diag.Diagnostics) {
		hosts, diags := stringsOf(ctx, m.Hosts)
		paths, d := stringsOf(ctx, m.Paths)
		diags.Append(d...)
		return api.GatewaySpec{InstanceID: m.InstanceID.ValueString(), Hosts: hosts, Paths: paths,
			Port: int32(m.Port.ValueInt64()), TLS: m.TLS.ValueBoolPointer(), RedirectHTTP: m.RedirectHTTP.ValueBoolPointer()}, diags
	},
	fromSpec: func(_ context.Context, s *api.GatewaySpec, m *gatewayModel) diag.Diagnostics {
		m.InstanceID = types.StringValue(s.InstanceID)
		m.Hosts = stringListValue(m.Hosts, s.Hosts)
		m.Paths = stringListValue(types.ListUnknown(types.StringType), s.Paths)
		m.Port = int64Value(m.Port, int64(s.Port))
		m.TLS = types.BoolPointerValue(s.TLS)
		m.RedirectHTTP = types.BoolPointerValue(s.RedirectHTTP)
		return nil
	},
	statusValues: func(t *api.GatewayStatus) attrValues {
		rts := make([]attr.Value, len(t.Runtimes))
		for i, r := range t.Runtimes {
			expiry := ""
			if r.CertificateExpiry != nil {
				expiry = r.CertificateExpiry.UTC().Format(time.RFC3339)
			}
			rts[i] = types.ObjectValueMust(gatewayRuntimeType.AttrTypes, map[string]attr.Value{
				"runtime_id": types.StringValue(r.RuntimeID), "runtime": types.StringValue(r.Runtime),
				"address": types.StringValue(r.Address), "url": types.StringValue(r.URL),
				"certificate_ready": types.BoolValue(r.CertificateReady), "certificate_expiry": types.StringValue(expiry),
				"phase": types.StringValue(string(r.Phase)), "message": types.StringValue(r.Message),
			})
		}
		return attrValues{"url": types.StringValue(t.URL), "runtimes": types.ListValueMust(gatewayRuntimeType, rts)}
	},
	createTimeout: 15 * time.Minute,
	updateTimeout: 15 * time.Minute,
	deleteTimeout: 10 * time.Minute,
}

// domainNameModel is qleet_domain_name.
type domainNameModel struct {
	objectMeta
	Zone     types.String `tfsdk:"zone"`
	Provider types.String `tfsdk:"dns_provider"`
}

var dnsRecordAttributes = map[string]rschema.Attribute{
	"name":    rschema.StringAttribute{Description: "The record's full name.", Computed: true},
	"type":    rschema.StringAttribute{Description: "The record type: `A` for addresses, `CNAME` for a load balancer's name.", Computed: true},
	"targets": rschema.ListAttribute{Description: "The addresses.", Computed: true, ElementType: types.StringType},
	"gateway": rschema.StringAttribute{Description: "The gateways the record is for: several, comma-separated, when they serve its host on paths of their own.", Computed: true},
}

var dnsRecordType = objectTypeOf(dnsRecordAttributes)

var domainNameKind = &kind[api.DomainNameSpec, api.DomainNameStatus, domainNameModel]{
	name: api.KindDomainName,
	api:  (*client.Client).DomainNames,
	attributes: map[string]rschema.Attribute{
		"zone": rschema.StringAttribute{
			Description: "The zone, e.g. `example.com`. One domain name per zone.",
			Required:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"dns_provider": rschema.StringAttribute{
			Description: "Where the records go: `none` (listed in status; the default) or `route53` (also written to Route53, for gateways on eks runtimes).",
			Optional:    true,
			Computed:    true,
			Validators:  []validator.String{stringvalidator.OneOf(api.DNSProviders...)},
		},
	},
	statusAttributes: map[string]rschema.Attribute{
		"records": rschema.ListNestedAttribute{
			Description:  "The zone's records: one per host name that gateways serve in it, with their addresses.",
			Computed:     true,
			NestedObject: rschema.NestedAttributeObject{Attributes: dnsRecordAttributes},
		},
	},
	renames: map[string]string{"provider": "dns_provider"},
	toSpec: func(_ context.Context, m *domainNameModel) (api.DomainNameSpec, diag.Diagnostics) {
		return api.DomainNameSpec{Zone: m.Zone.ValueString(), Provider: m.Provider.ValueString()}, nil
	},
	fromSpec: func(_ context.Context, s *api.DomainNameSpec, m *domainNameModel) diag.Diagnostics {
		m.Zone = types.StringValue(s.Zone)
		m.Provider = types.StringValue(s.Provider)
		return nil
	},
	statusValues: func(t *api.DomainNameStatus) attrValues {
		recs := make([]attr.Value, len(t.Records))
		for i, r := range t.Records {
			recs[i] = types.ObjectValueMust(dnsRecordType.AttrTypes, map[string]attr.Value{
				"name": types.StringValue(r.Name), "type": types.StringValue(r.Type),
				"targets": stringListValue(types.ListUnknown(types.StringType), r.Targets), "gateway": types.StringValue(r.Gateway),
			})
		}
		return attrValues{"records": types.ListValueMust(dnsRecordType, recs)}
	},
	createTimeout: time.Minute,
	updateTimeout: time.Minute,
	deleteTimeout: 5 * time.Minute,
}

// supportServiceModel is qleet_support_service.
type supportServiceModel struct {
	objectMeta
	RuntimeID  types.String `tfsdk:"runtime_id"`
	Type       types.String `tfsdk:"type"`
	Repository types.String `tfsdk:"repository"`
	Version    types.String `tfsdk:"version"`
	Values     types.String `tfsdk:"values"`
}

var supportServiceKind = &kind[api.SupportServiceSpec, api.SupportServiceStatus, supportServiceModel]{
	name: api.KindSupportService,
	api:  (*client.Client).SupportServices,
	attributes: map[string]rschema.Attribute{
		"runtime_id": rschema.StringAttribute{
			Description: "The ID of the qleet_kubernetes_runtime to install it on.",
			Required:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"type": rschema.StringAttribute{
			Description: "`ingress`, `cert-manager`, `external-dns` or `metrics-server`.",
			Required:    true,
			Validators:  []validator.String{stringvalidator.OneOf(api.SupportIngress, api.SupportCertManager, api.SupportExternalDNS, api.SupportMetricsServer)},
		},
		"repository": rschema.StringAttribute{
			Description: "A chart repository (a mirror) instead of the upstream one.",
			Optional:    true,
		},
		"version": rschema.StringAttribute{
			Description: "The chart version (default: the pinned upstream version).",
			Optional:    true,
		},
		"values": rschema.StringAttribute{
			Description: "A YAML document of chart values, e.g. `yamlencode({...})`.",
			Optional:    true,
		},
	},
	statusAttributes: map[string]rschema.Attribute{
		"chart":     rschema.StringAttribute{Description: "What was installed, and from where.", Computed: true},
		"namespace": rschema.StringAttribute{Description: "The namespace it is installed in.", Computed: true},
		"consumers": rschema.Int64Attribute{Description: "The objects that use it.", Computed: true},
	},
	toSpec: func(_ context.Context, m *supportServiceModel) (api.SupportServiceSpec, diag.Diagnostics) {
		return api.SupportServiceSpec{RuntimeID: m.RuntimeID.ValueString(), Type: m.Type.ValueString(),
			Repository: m.Repository.ValueString(), Version: m.Version.ValueString(), Values: m.Values.ValueString()}, nil
	},
	fromSpec: func(_ context.Context, s *api.SupportServiceSpec, m *supportServiceModel) diag.Diagnostics {
		m.RuntimeID = types.StringValue(s.RuntimeID)
		m.Type = types.StringValue(s.Type)
		m.Repository = stringValue(m.Repository, s.Repository)
		m.Version = stringValue(m.Version, s.Version)
		m.Values = stringValue(m.Values, s.Values)
		return nil
	},
	statusValues: func(t *api.SupportServiceStatus) attrValues {
		return attrValues{"chart": types.StringValue(t.Chart), "namespace": types.StringValue(t.Namespace), "consumers": types.Int64Value(int64(t.Consumers))}
	},
	createTimeout: 15 * time.Minute,
	updateTimeout: 15 * time.Minute,
	deleteTimeout: 10 * time.Minute,
}
