// Package cloud reconciles cloud_accounts (each is validated with STS GetCallerIdentity, and its account id
// reported) and gives the other controllers an account's AWS clients.
package cloud

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// AccountReconciler reconciles cloud_accounts.
type AccountReconciler struct {
	// Accounts makes the accounts' clients. Required.
	Accounts *awscloud.Accounts
}

// Reconcile asks STS who the account's credentials are, and reports the account id. Credentials that
// AWS refuses fail the account, naming the action; throttling and outages are retried.
func (r *AccountReconciler) Reconcile(ctx context.Context, ca *api.CloudAccount) (reconcile.Result, error) {
	cls, err := r.Accounts.Connect(ctx, ca, "")
	if err != nil {
		return reconcile.Result{}, reconcile.Terminal(err)
	}
	out, err := cls.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return reconcile.Result{}, awscloud.Outcome(fmt.Errorf("validate the credentials: %w", awscloud.Classify(err)))
	}
	ca.Status.AccountID, ca.Status.CallerARN = deref(out.Account), deref(out.Arn)
	ca.Status.Message = fmt.Sprintf("AWS account %s as %s", ca.Status.AccountID, ca.Status.CallerARN)
	return reconcile.Result{}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
