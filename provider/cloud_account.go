package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// cloudAccountModel is qleet_cloud_account.
type cloudAccountModel struct {
	objectMeta
	Provider        types.String `tfsdk:"provider_type"`
	Region          types.String `tfsdk:"region"`
	AccessKeyID     types.String `tfsdk:"access_key_id"`
	SecretAccessKey types.String `tfsdk:"secret_access_key"`
	SessionToken    types.String `tfsdk:"session_token"`
	SecretKeyWO     types.String `tfsdk:"secret_access_key_wo"`
	SecretKeyWOVer  types.Int64  `tfsdk:"secret_access_key_wo_version"`
	SessionWO       types.String `tfsdk:"session_token_wo"`
	SessionWOVer    types.Int64  `tfsdk:"session_token_wo_version"`
	RoleARN         types.String `tfsdk:"role_arn"`
	ExternalID      types.String `tfsdk:"external_id"`
	Endpoint        types.String `tfsdk:"endpoint"`
}

var cloudAccountKind = &kind[api.CloudAccountSpec, api.CloudAccountStatus, cloudAccountModel]{
	name: api.KindCloudAccount,
	api:  (*client.Client).CloudAccounts,
	attributes: map[string]rschema.Attribute{
		"provider_type": rschema.StringAttribute{
			Description: "The cloud (the API's spec.provider; `provider` is reserved in Terraform): `aws`.",
			Required:    true,
			Validators:  []validator.String{stringvalidator.OneOf(api.CloudAWS)},
		},
		"region": rschema.StringAttribute{
			Description: "The default region of the calls made with the account, e.g. `us-east-1`.",
			Required:    true,
		},
		"access_key_id": rschema.StringAttribute{
			Description: "The access key id of static credentials, set with `secret_access_key`. Unset: the control plane's own credentials (its environment or instance role) assume `role_arn`.",
			Optional:    true,
		},
		"secret_access_key": rschema.StringAttribute{
			Description: "The secret of the access key. Write-only in the API: kept from the configuration, in the Terraform state " +
				"(sensitive); on Terraform 1.11 and later, `secret_access_key_wo` with `secret_access_key_wo_version` keeps it out of the plan and the state.",
			Optional:  true,
			Sensitive: true,
		},
		"session_token": rschema.StringAttribute{
			Description: "The session token of temporary access keys. Write-only in the API: kept from the configuration, in the Terraform " +
				"state (sensitive); on Terraform 1.11 and later, `session_token_wo` with `session_token_wo_version` keeps it out of the plan and the state.",
			Optional:  true,
			Sensitive: true,
		},
		"role_arn": rschema.StringAttribute{
			Description: "A role QleetOS assumes through STS AssumeRole (with the access keys when set), e.g. `arn:aws:iam::123456789012:role/qleetos`.",
			Optional:    true,
		},
		"external_id": rschema.StringAttribute{
			Description: "The external id the role's trust policy asks for; only with `role_arn`.",
			Optional:    true,
		},
		"endpoint": rschema.StringAttribute{
			Description: "Overrides the URL of every AWS service used with the account (a private cloud, or a local stand-in such as `make demo-aws` starts).",
			Optional:    true,
		},
	},
	statusAttributes: map[string]rschema.Attribute{
		"account_id": rschema.StringAttribute{Description: "The AWS account the credentials belong to, from STS GetCallerIdentity.", Computed: true},
		"caller_arn": rschema.StringAttribute{Description: "The identity QleetOS acts as (the assumed role's session with `role_arn`).", Computed: true},
	},
	renames: map[string]string{"provider": "provider_type"},
	toSpec: func(_ context.Context, m *cloudAccountModel) (api.CloudAccountSpec, diag.Diagnostics) {
		return api.CloudAccountSpec{
			Provider: m.Provider.ValueString(), Region: m.Region.ValueString(), AccessKeyID: m.AccessKeyID.ValueString(),
			// At most one of each pair is set.
			SecretAccessKey: m.SecretAccessKey.ValueString() + m.SecretKeyWO.ValueString(),
			SessionToken:    m.SessionToken.ValueString() + m.SessionWO.ValueString(),
			RoleARN:         m.RoleARN.ValueString(), ExternalID: m.ExternalID.ValueString(), Endpoint: m.Endpoint.ValueString(),
		}, nil
	},
	fromSpec: func(_ context.Context, s *api.CloudAccountSpec, m *cloudAccountModel) diag.Diagnostics {
		m.Provider = types.StringValue(s.Provider)
		m.Region = stringValue(m.Region, s.Region)
		m.AccessKeyID = stringValue(m.AccessKeyID, s.AccessKeyID)
		// Only the controller role reads the secret parts back; keep the configured values, and none
		// where they are write-only (the _wo_version set).
		if s.SecretAccessKey != "" && m.SecretKeyWOVer.IsNull() {
			m.SecretAccessKey = types.StringValue(s.SecretAccessKey)
		} else if m.SecretAccessKey.IsUnknown() {
			m.SecretAccessKey = types.StringNull()
		}
		if s.SessionToken != "" && m.SessionWOVer.IsNull() {
			m.SessionToken = types.StringValue(s.SessionToken)
		} else if m.SessionToken.IsUnknown() {
			m.SessionToken = types.StringNull()
		}
		m.RoleARN = stringValue(m.RoleARN, s.RoleARN)
		m.ExternalID = stringValue(m.ExternalID, s.ExternalID)
		m.Endpoint = stringValue(m.Endpoint, s.Endpoint)
		return nil
	},
	statusValues: func(t *api.CloudAccountStatus) attrValues {
		return attrValues{"account_id": types.StringValue(t.AccountID), "caller_arn": types.StringValue(t.CallerARN)}
	},
	createTimeout: 2 * time.Minute,
	updateTimeout: 2 * time.Minute,
	deleteTimeout: 20 * time.Minute,
}

// cloudAccountResource is qleet_cloud_account: the generic resource, whose delete first waits for the
// runtimes that controllers provisioned with the account (from a runtime profile, reclaimed once the
// profile is gone) to finish deleting what they made in AWS. Destroying a configuration deletes the
// profile before the account, and those runtimes, which Terraform does not know, still need the account
// to clean up. A runtime or profile that a user declared is not waited for: the delete answers 409,
// naming it.
type cloudAccountResource struct {
	*objectResource[api.CloudAccountSpec, api.CloudAccountStatus, cloudAccountModel]
}

func newCloudAccountResource() resource.Resource {
	return cloudAccountResource{cloudAccountKind.resource().(*objectResource[api.CloudAccountSpec, api.CloudAccountStatus, cloudAccountModel])}
}

// Delete waits for the provisioned runtimes that use the account to go, then deletes it.
func (r cloudAccountResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var id types.String
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("id"), &id)...)
	if resp.Diagnostics.HasError() || r.c == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, cloudAccountKind.deleteTimeout)
	defer cancel()
	for {
		busy, err := r.provisionedUsers(wctx, id.ValueString())
		if err == nil && busy == "" {
			break
		}
		if err == nil {
			err = fmt.Errorf("kubernetes_runtime %q, provisioned with the account, is still being removed", busy)
		}
		select {
		case <-wctx.Done():
			resp.Diagnostics.AddWarning("Provisioned runtimes still use the cloud account", err.Error())
		case <-time.After(time.Second):
			continue
		}
		break
	}
	r.objectResource.Delete(ctx, req, resp)
}

// provisionedUsers names a runtime that a controller provisioned with the account, if one remains.
func (r cloudAccountResource) provisionedUsers(ctx context.Context, id string) (string, error) {
	for rt, err := range r.c.KubernetesRuntimes().All(ctx, client.ListOptions{References: id}) {
		if err != nil {
			return "", err
		}
		if len(rt.Owners) > 0 {
			return rt.Name, nil
		}
	}
	return "", nil
}
