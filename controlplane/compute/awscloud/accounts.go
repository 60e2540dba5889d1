package awscloud

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// Outcome turns an AWS error into a reconcile outcome: a permanent one (access denied, bad input, bad
// credentials) fails the object with its message, naming the action; anything else is retried with backoff.
func Outcome(err error) error {
	if err == nil || IsRetryable(err) {
		return err
	}
	return reconcile.Terminal(err)
}

// Accounts reads cloud accounts through the API (with a controller token, which sees their secret parts)
// and makes their AWS clients, kept per account version and region. The zero value with Client set is
// ready to use; it is safe for concurrent use.
type Accounts struct {
	// Client reads cloud_accounts. It needs the controller role.
	Client *client.Client
	// Configure, when set, adjusts every Account before use (tests give an HTTP client here).
	Configure func(*Account)

	once  sync.Once
	deps  reconcile.Deps[api.CloudAccountSpec, api.CloudAccountStatus]
	mu    sync.Mutex
	cache map[string]*Clients
}

// Get returns the cloud account with that id once it is Ready (validated); otherwise an error that makes
// the caller wait for it, or fail with it when it failed.
func (a *Accounts) Get(ctx context.Context, id string) (*api.CloudAccount, error) {
	a.once.Do(func() { a.deps.Resource = a.Client.CloudAccounts() })
	return a.deps.RequireReady(ctx, id)
}

// Clients returns the AWS clients of a Ready cloud account in region (its default region when empty).
func (a *Accounts) Clients(ctx context.Context, id, region string) (*Clients, *api.CloudAccount, error) {
	ca, err := a.Get(ctx, id)
	if err != nil {
		return nil, ca, err
	}
	cls, err := a.Connect(ctx, ca, region)
	return cls, ca, err
}

// Account returns the Account of a cloud account, configured like the clients.
func (a *Accounts) Account(ca *api.CloudAccount) Account {
	acc := AccountOf(ca)
	if a.Configure != nil {
		a.Configure(&acc)
	}
	return acc
}

// Connect returns the AWS clients of a cloud account in region, made once per account generation and
// region, whether or not the account is Ready yet (its own reconcile validates it with them).
func (a *Accounts) Connect(ctx context.Context, ca *api.CloudAccount, region string) (*Clients, error) {
	if ca.Spec.Provider != api.CloudAWS {
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
		a.cache = map[string]*Clients{}
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
