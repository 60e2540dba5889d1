// Package cloud reconciles cloud_accounts (each is validated with STS GetCallerIdentity, and its account id
// reported) and gives the other controllers an account's AWS clients.
package cloud

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// AccountReconciler reconciles cloud_accounts.
type AccountReconciler struct {
	// Accounts makes the accounts' clients. Required.
	Accounts *Accounts
}

// Reconcile asks STS who the account's credentials are, and reports the account id. Credentials that
// AWS refuses fail the account, naming the action; throttling and outages are retried.
func (r *AccountReconciler) Reconcile(ctx context.Context, ca *client.CloudAccount) (reconcile.Result, error) {
	cls, err := r.Accounts.connect(ctx, ca, "")
	if err != nil {
		return reconcile.Result{}, reconcile.Terminal(err)
	}
	out, err := cls.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return reconcile.Result{}, Outcome(fmt.Errorf("validate the credentials: %w", awscloud.Classify(err)))
	}
	ca.Status.AccountID, ca.Status.CallerARN = deref(out.Account), deref(out.Arn)
	ca.Status.Message = fmt.Sprintf("AWS account %s as %s", ca.Status.AccountID, ca.Status.CallerARN)
	return reconcile.Result{}, nil
}

// Outcome turns an AWS error into a reconcile outcome: a permanent one (access denied, bad input, bad
// credentials) fails the object with its message, naming the action; anything else is retried with backoff.
func Outcome(err error) error {
	if err == nil || awscloud.IsRetryable(err) {
		return err
	}
	return reconcile.Terminal(err)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Accounts reads cloud accounts through the API (with a controller token, which sees their secret parts)
// and makes their AWS clients, kept per account version and region. The zero value with Client set is
// ready to use; it is safe for concurrent use.
type Accounts struct {
	// Client reads cloud_accounts. It needs the controller role.
	Client *client.Client
	// Configure, when set, adjusts every Account before use (tests give an HTTP client here).
	Configure func(*awscloud.Account)

	once  sync.Once
	deps  reconcile.Deps[client.CloudAccountSpec, client.CloudAccountStatus]
	mu    sync.Mutex
	cache map[string]*awscloud.Clients
}

// Get returns the cloud account with that id once it is Ready (validated); otherwise an error that makes
// the caller wait for it, or fail with it when it failed.
func (a *Accounts) Get(ctx context.Context, id string) (*client.CloudAccount, error) {
	a.once.Do(func() { a.deps.Resource = a.Client.CloudAccounts() })
	return a.deps.RequireReady(ctx, id)
}

// Clients returns the AWS clients of a Ready cloud account in region (its default region when empty).
func (a *Accounts) Clients(ctx context.Context, id, region string) (*awscloud.Clients, *client.CloudAccount, error) {
	ca, err := a.Get(ctx, id)
	if err != nil {
		return nil, ca, err
	}
	cls, err := a.connect(ctx, ca, region)
	return cls, ca, err
}

// Account returns the awscloud.Account of a cloud account, configured like the clients.
func (a *Accounts) Account(ca *client.CloudAccount) awscloud.Account {
	acc := awscloud.AccountOf(ca)
	if a.Configure != nil {
		a.Configure(&acc)
	}
	return acc
}

func (a *Accounts) connect(ctx context.Context, ca *client.CloudAccount, region string) (*awscloud.Clients, error) {
	if ca.Spec.Provider != client.CloudAWS {
		return nil, fmt.Errorf("cloud_account %q: provider %q is not supported", ca.Name, ca.Spec.Provider)
	}
	if ca.Spec.AccessKeyID != "" && ca.Spec.SecretAccessKey == "" {
		return nil, fmt.Errorf("cloud_account %q: spec.secret_access_key is empty (is this token allowed to read write-only fields?)", ca.Name)
	}
	key := fmt.Sprintf("%s/%d/%s", ca.ID, ca.Generation, region)
	a.mu.Lock()
	defer a.mu.Unlock()
	if cls, ok := a.cache[key]; ok {
		return cls, nil
	}
	cls, err := a.Account(ca).Connect(ctx, region)
	if err != nil {
		return nil, fmt.Errorf("cloud_account %q: %w", ca.Name, err)
	}
	if a.cache == nil {
		a.cache = map[string]*awscloud.Clients{}
	}
	current := fmt.Sprintf("%s/%d/", ca.ID, ca.Generation)
	for k := range a.cache { // an older generation of the account is not used again
		if strings.HasPrefix(k, ca.ID+"/") && !strings.HasPrefix(k, current) {
			delete(a.cache, k)
		}
	}
	a.cache[key] = cls
	return cls, nil
}
