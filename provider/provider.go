// Package provider is the Terraform provider for QleetOS. It is built on the project's own Go client
// (package client, over the types of package api): every resource and data source is a thin schema
// plus model conversion over the generic plumbing in object_resource.go and object_data_source.go.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// Address is the provider's registry address.
const Address = "registry.terraform.io/qleetos/qleet"

// Environment variables the provider falls back to when an attribute is not set.
const (
	EnvEndpoint = "QLEET_ENDPOINT"
	EnvToken    = "QLEET_TOKEN"
	EnvCACert   = "QLEET_CA_CERT"
)

// checkTimeout bounds the connectivity and token check made when the provider is configured.
const checkTimeout = 15 * time.Second

// qleetProvider is the provider implementation.
type qleetProvider struct {
	version string
}

var (
	_ provider.Provider                       = (*qleetProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*qleetProvider)(nil)
)

// New returns a constructor of the provider, as providerserver.Serve wants it.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &qleetProvider{version: version} }
}

type providerModel struct {
	Endpoint types.String `tfsdk:"endpoint"`
	Token    types.String `tfsdk:"token"`
	CACert   types.String `tfsdk:"ca_cert"`
}

func (p *qleetProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "qleet"
	resp.Version = p.version
}

func (p *qleetProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Manage QleetOS objects (Kubernetes runtimes, workload definitions and instances) through the QleetOS API. " +
			"Resources are created and updated in the control plane, and apply returns once the controllers report them reconciled.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Description: "Base URL of the QleetOS API, e.g. `http://127.0.0.1:8080`. Falls back to the " + EnvEndpoint + " environment variable.",
				Optional:    true,
			},
			"token": schema.StringAttribute{
				Description: "Bearer token for the QleetOS API (a developer or admin token). Falls back to the " + EnvToken + " environment variable.",
				Optional:    true,
				Sensitive:   true,
			},
			"ca_cert": schema.StringAttribute{
				Description: "PEM-encoded CA certificate(s) to trust for an https endpoint, or the path of a file holding them. " +
					"Falls back to the " + EnvCACert + " environment variable. The system roots are used when unset.",
				Optional: true,
			},
		},
	}
}

func (p *qleetProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for name, v := range map[string]types.String{"endpoint": cfg.Endpoint, "token": cfg.Token, "ca_cert": cfg.CACert} {
		if v.IsUnknown() {
			resp.Diagnostics.AddAttributeError(path.Root(name), "Unknown QleetOS provider "+name,
				fmt.Sprintf("The provider's %s is not known until apply (it depends on a resource that is not created yet). "+
					"Set it to a value known at plan time, or use the %s environment variable.", name, envFor(name)))
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	endpoint := valueOrEnv(cfg.Endpoint, EnvEndpoint)
	token := valueOrEnv(cfg.Token, EnvToken)
	caCert := valueOrEnv(cfg.CACert, EnvCACert)
	if endpoint == "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Missing QleetOS API endpoint",
			"Set the provider's endpoint, or the "+EnvEndpoint+" environment variable, to the QleetOS API URL (e.g. http://127.0.0.1:8080).")
	}
	if token == "" {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing QleetOS API token",
			"Set the provider's token, or the "+EnvToken+" environment variable. `qleet server` writes an admin token to <data dir>/admin.token.")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	opts := []client.Option{
		client.WithToken(token),
		client.WithUserAgent(fmt.Sprintf("terraform-provider-qleet/%s terraform/%s", p.version, req.TerraformVersion)),
	}
	if caCert != "" {
		pem, err := loadPEM(caCert)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("ca_cert"), "Invalid ca_cert", err.Error())
			return
		}
		opts = append(opts, client.WithCACert(pem))
	}
	c, err := client.New(endpoint, opts...)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid QleetOS API endpoint", err.Error())
		return
	}
	if err := checkAPI(ctx, c); err != nil {
		resp.Diagnostics.AddError("Cannot use the QleetOS API", err.Error())
		return
	}
	resp.ResourceData = c
	resp.DataSourceData = c
	resp.EphemeralResourceData = c
}

// EphemeralResources are the ephemeral resources: qleet_token, a short-lived API token.
func (p *qleetProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{newTokenEphemeral}
}

func (p *qleetProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		kubernetesRuntimeKind.resource,
		workloadDefinitionKind.resource,
		workloadInstanceKind.resource,
		runtimeProfileKind.resource,
		gatewayKind.resource,
		domainNameKind.resource,
		supportServiceKind.resource,
		secretKind.resource,
		databaseKind.resource,
		bucketKind.resource,
		newCloudAccountResource,
	}
}

func (p *qleetProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		kubernetesRuntimeKind.dataSource, kubernetesRuntimeKind.listDataSource,
		workloadDefinitionKind.dataSource, workloadDefinitionKind.listDataSource,
		workloadInstanceKind.dataSource, workloadInstanceKind.listDataSource,
		runtimeProfileKind.dataSource, runtimeProfileKind.listDataSource,
		gatewayKind.dataSource, gatewayKind.listDataSource,
		domainNameKind.dataSource, domainNameKind.listDataSource,
		supportServiceKind.dataSource, supportServiceKind.listDataSource,
		secretKind.dataSource, secretKind.listDataSource,
		databaseKind.dataSource, databaseKind.listDataSource,
		bucketKind.dataSource, bucketKind.listDataSource,
		cloudAccountKind.dataSource, cloudAccountKind.listDataSource,
		newPlanDataSource,
	}
}

func envFor(attr string) string {
	switch attr {
	case "endpoint":
		return EnvEndpoint
	case "token":
		return EnvToken
	}
	return EnvCACert
}

func valueOrEnv(v types.String, env string) string {
	if !v.IsNull() && v.ValueString() != "" {
		return v.ValueString()
	}
	return os.Getenv(env)
}

// loadPEM returns PEM data given inline or as a file path.
func loadPEM(v string) ([]byte, error) {
	if strings.Contains(v, "-----BEGIN") {
		return []byte(v), nil
	}
	data, err := os.ReadFile(v)
	if err != nil {
		return nil, fmt.Errorf("ca_cert is neither PEM data nor a readable file: %w", err)
	}
	return data, nil
}

// checkAPI makes sure the endpoint answers and accepts the token, so that a wrong endpoint or token is one
// clear error at configure time rather than a failure in every resource.
func checkAPI(ctx context.Context, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if err := c.Do(ctx, "GET", "/healthz", nil, nil, nil, nil); err != nil {
		return fmt.Errorf("the QleetOS API at %s is not reachable: %s; check the provider's endpoint (or %s) and that the server runs",
			c.Endpoint(), reachError(err), EnvEndpoint)
	}
	_, err := c.KubernetesRuntimes().List(ctx, client.ListOptions{Limit: 1})
	switch {
	case err == nil, api.IsForbidden(err):
		return nil
	case api.IsUnauthorized(err):
		return fmt.Errorf("the QleetOS API at %s rejected the token (unauthorized); check the provider's token (or %s)", c.Endpoint(), EnvToken)
	default:
		return fmt.Errorf("the QleetOS API at %s answered an authenticated request with an error: %w", c.Endpoint(), err)
	}
}

// reachError shortens a transport error to its cause (e.g. "connection refused").
func reachError(err error) string {
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		return apiErr.Error()
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		return opErr.Err.Error()
	}
	var uErr *url.Error
	if errors.As(err, &uErr) {
		return uErr.Err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", checkTimeout)
	}
	return err.Error()
}
