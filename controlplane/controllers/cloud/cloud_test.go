package cloud_test

import (
	"github.com/qleetos/terraform-provider-qleet/api"

	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/cloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

func TestCloudAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sim := awssim.New(awssim.Config{})
	require.NoError(t, sim.Start(ctx))
	t.Cleanup(func() { _ = sim.Stop(context.Background()) })
	acct, err := sim.AddAccount("")
	require.NoError(t, err)
	svc := apitest.Start(t)
	admin, ctrl := svc.Client(t, server.RoleAdmin), svc.Client(t, server.RoleController)
	rec := &cloud.AccountReconciler{Accounts: &awscloud.Accounts{Client: ctrl}}
	keys := api.CloudAccountSpec{Provider: api.CloudAWS, Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}
	// validate creates the account and runs its reconcile once, as the controller would.
	validate := func(t *testing.T, name string, spec api.CloudAccountSpec) (*api.CloudAccount, error) {
		t.Helper()
		ca, err := admin.CloudAccounts().Create(ctx, &api.CloudAccount{Meta: api.Meta{Name: name}, Spec: spec})
		require.NoError(t, err)
		ca, err = ctrl.CloudAccounts().Get(ctx, ca.ID)
		require.NoError(t, err)
		_, err = rec.Reconcile(ctx, ca)
		return ca, err
	}

	t.Run("access keys are validated with GetCallerIdentity and the account id reported", func(t *testing.T) {
		sim.ResetCalls()
		ca, err := validate(t, "keys", keys)
		require.NoError(t, err)
		require.Equal(t, acct.ID, ca.Status.AccountID)
		require.Equal(t, acct.ARN, ca.Status.CallerARN)
		calls := sim.Calls()
		require.Len(t, calls, 1)
		require.Equal(t, "sts", calls[0].Service)
		require.Equal(t, "GetCallerIdentity", calls[0].Action)
		require.Equal(t, acct.AccessKeyID, calls[0].AccessKeyID, "signed with the account's key")
	})

	t.Run("the secret is write-only: only the controller role reads it", func(t *testing.T) {
		got, err := admin.CloudAccounts().GetByName(ctx, "keys")
		require.NoError(t, err)
		require.Empty(t, got.Spec.SecretAccessKey)
		require.Equal(t, acct.AccessKeyID, got.Spec.AccessKeyID)
		got, err = ctrl.CloudAccounts().Get(ctx, got.ID)
		require.NoError(t, err)
		require.Equal(t, acct.SecretAccessKey, got.Spec.SecretAccessKey)
	})

	t.Run("a role is assumed with its external id", func(t *testing.T) {
		arn, err := sim.AddRole(acct.ID, "qleetos", awssim.TrustPolicy(acct.ARN, "ext-1234"))
		require.NoError(t, err)
		spec := keys
		spec.RoleARN, spec.ExternalID = arn, "ext-1234"
		sim.ResetCalls()
		ca, err := validate(t, "role", spec)
		require.NoError(t, err)
		require.Equal(t, acct.ID, ca.Status.AccountID)
		require.Contains(t, ca.Status.CallerARN, ":assumed-role/qleetos/")
		var actions []string
		for _, c := range sim.Calls() {
			actions = append(actions, c.Service+":"+c.Action)
		}
		require.Equal(t, []string{"sts:AssumeRole", "sts:GetCallerIdentity"}, actions)

		spec.ExternalID = "wrong-id"
		_, err = validate(t, "role-wrong-external-id", spec)
		require.True(t, reconcile.IsTerminal(err), "%v", err)
		require.Contains(t, err.Error(), "sts:AssumeRole", "the failing action is named")
	})

	t.Run("a wrong secret fails the account, naming the action", func(t *testing.T) {
		spec := keys
		spec.SecretAccessKey = "not-the-secret"
		_, err := validate(t, "wrong-secret", spec)
		require.True(t, reconcile.IsTerminal(err), "not retried: %v", err)
		require.Contains(t, err.Error(), "sts:GetCallerIdentity")
		require.NotContains(t, err.Error(), "not-the-secret")
	})

	t.Run("access denied is permanent and throttling is retried", func(t *testing.T) {
		sim.Deny("sts", "GetCallerIdentity")
		_, err := validate(t, "denied", keys)
		require.True(t, reconcile.IsTerminal(err))
		require.Contains(t, err.Error(), "access denied to sts:GetCallerIdentity")
		sim.ClearFaults()
		sim.Throttle("sts", "GetCallerIdentity", 2)
		start := time.Now()
		ca, err := validate(t, "throttled", keys)
		require.NoError(t, err, "the SDK retried the throttled calls")
		require.Equal(t, acct.ID, ca.Status.AccountID)
		t.Logf("two throttled calls retried in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("bad input is a 400 naming the field, and nothing is written", func(t *testing.T) {
		spec := keys
		spec.Region, spec.RoleARN = "nowhere", "arn:aws:iam::1:user/x"
		_, err := admin.CloudAccounts().Create(ctx, &api.CloudAccount{Meta: api.Meta{Name: "bad"}, Spec: spec})
		var ce *api.Error
		require.True(t, errors.As(err, &ce), "%v", err)
		require.Equal(t, http.StatusBadRequest, api.HTTPStatus(ce.Code))
		var fields []string
		for _, f := range ce.Fields {
			fields = append(fields, f.Field)
		}
		require.ElementsMatch(t, []string{"spec.region", "spec.role_arn"}, fields, strings.Join(fields, ","))
		_, err = admin.CloudAccounts().GetByName(ctx, "bad")
		require.True(t, api.IsNotFound(err))
	})
}
