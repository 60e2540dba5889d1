package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	eschema "github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// tokenDefaultTTL is how long an ephemeral token lives when ttl is unset; tokenMaxTTL bounds ttl.
const (
	tokenDefaultTTL = 15 * time.Minute
	tokenMaxTTL     = 24 * time.Hour
)

// tokenEphemeral is the ephemeral resource qleet_token: a short-lived API token made for one Terraform
// run, revoked when Terraform closes it, and expiring after ttl in any case.
type tokenEphemeral struct{ c *client.Client }

var (
	_ ephemeral.EphemeralResourceWithConfigure = (*tokenEphemeral)(nil)
	_ ephemeral.EphemeralResourceWithClose     = (*tokenEphemeral)(nil)
)

func newTokenEphemeral() ephemeral.EphemeralResource { return &tokenEphemeral{} }

// tokenModel is qleet_token.
type tokenModel struct {
	Name      types.String `tfsdk:"name"`
	Role      types.String `tfsdk:"role"`
	TTL       types.String `tfsdk:"ttl"`
	ID        types.String `tfsdk:"id"`
	Token     types.String `tfsdk:"token"`
	ExpiresAt types.String `tfsdk:"expires_at"`
}

// tokenPrivateKey is the private data key that carries the token's id from Open to Close.
const tokenPrivateKey = "token_id"

// tokenOpeners remembers the client that made each open token (id -> *client.Client), so that Close
// revokes it with the same credentials even when one provider process serves several configurations
// (a debug or test reattach), where the last one configured may be the token's own viewer role.
var tokenOpeners sync.Map

func (e *tokenEphemeral) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_token"
}

func (e *tokenEphemeral) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = eschema.Schema{
		Description: "A short-lived QleetOS API token for one Terraform run (Terraform 1.10 and later): made when Terraform " +
			"opens it, revoked when Terraform closes it at the end of the plan or apply, and expiring after `ttl` in any case. " +
			"It is never in the plan or the state. Use it where ephemeral values go: another provider's configuration " +
			"(e.g. a second `qleet` provider that may only read), or a write-only attribute. Making tokens needs the " +
			"provider's own token to be an admin token.",
		Attributes: map[string]eschema.Attribute{
			"name": eschema.StringAttribute{
				Description: "What the token is for, shown in `qleet token list`: a DNS-1123 label.",
				Required:    true,
				Validators:  []validator.String{dns1123Label()},
			},
			"role": eschema.StringAttribute{
				Description: "The token's role: `viewer` (reads objects) or `developer` (reads and writes objects).",
				Required:    true,
				Validators:  []validator.String{stringvalidator.OneOf(api.RoleViewer, api.RoleDeveloper)},
			},
			"ttl": eschema.StringAttribute{
				Description: fmt.Sprintf("How long the token is accepted, as a duration such as \"10m\" (default %s, at most %s): "+
					"the bound if Terraform never closes it.", tokenDefaultTTL, tokenMaxTTL),
				Optional:   true,
				Validators: []validator.String{durationBetween(time.Minute, tokenMaxTTL)},
			},
			"id":         eschema.StringAttribute{Description: "The token's id, as `qleet token list` shows it.", Computed: true},
			"token":      eschema.StringAttribute{Description: "The bearer token.", Computed: true, Sensitive: true},
			"expires_at": eschema.StringAttribute{Description: "When the token stops being accepted (RFC 3339).", Computed: true},
		},
	}
}

func (e *tokenEphemeral) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	e.c = configureClient(req.ProviderData, &resp.Diagnostics)
}

func (e *tokenEphemeral) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m tokenModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ttl := tokenDefaultTTL
	if known(m.TTL) {
		d, err := time.ParseDuration(m.TTL.ValueString())
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("ttl"), "Invalid ttl", err.Error())
			return
		}
		ttl = d
	}
	if e.c == nil {
		resp.Diagnostics.AddError("Unconfigured QleetOS provider", "The provider was not configured before the token was opened.")
		return
	}
	expires := time.Now().Add(ttl).UTC().Truncate(time.Second)
	tok, err := e.c.Tokens().Create(ctx, api.TokenRequest{Name: m.Name.ValueString(), Role: m.Role.ValueString(), ExpiresAt: &expires})
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot make token %q", m.Name.ValueString()),
			err.Error()+"\n\nMaking tokens needs the provider's token to be an admin token.")
		return
	}
	m.ID, m.Token = types.StringValue(tok.ID), types.StringValue(tok.Token)
	m.ExpiresAt = types.StringValue(expires.Format(time.RFC3339))
	if tok.ExpiresAt != nil {
		m.ExpiresAt = types.StringValue(tok.ExpiresAt.UTC().Format(time.RFC3339))
	}
	tokenOpeners.Store(tok.ID, e.c)
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
	id, _ := json.Marshal(tok.ID)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, tokenPrivateKey, id)...)
}

// Close revokes the token; one already gone is fine.
func (e *tokenEphemeral) Close(ctx context.Context, req ephemeral.CloseRequest, resp *ephemeral.CloseResponse) {
	raw, diags := req.Private.GetKey(ctx, tokenPrivateKey)
	resp.Diagnostics.Append(diags...)
	var id string
	if resp.Diagnostics.HasError() || raw == nil || json.Unmarshal(raw, &id) != nil || id == "" {
		return
	}
	c := e.c
	if opener, ok := tokenOpeners.LoadAndDelete(id); ok {
		c = opener.(*client.Client)
	}
	if c == nil {
		return
	}
	if err := c.Tokens().Revoke(ctx, id); err != nil && !api.IsNotFound(err) {
		resp.Diagnostics.AddWarning("Cannot revoke the QleetOS token "+id,
			err.Error()+"\n\nIt stops being accepted at its expiry; `qleet token revoke "+id+"` revokes it now.")
	}
}

// durationValidator accepts a Go duration within [min, max].
type durationValidator struct{ min, max time.Duration }

func durationBetween(min, max time.Duration) validator.String { return durationValidator{min, max} }

func (v durationValidator) Description(context.Context) string {
	return fmt.Sprintf("a duration such as \"10m\", from %s to %s", v.min, v.max)
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v durationValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if !known(req.ConfigValue) {
		return
	}
	d, err := time.ParseDuration(req.ConfigValue.ValueString())
	if err != nil || d < v.min || d > v.max {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration",
			fmt.Sprintf("%s must be %s, not %q", req.Path, v.Description(context.Background()), req.ConfigValue.ValueString()))
	}
}
