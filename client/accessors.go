package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// SetImage sets one container's image in a workload definition, the hook a CI pipeline calls after it
// pushes an image; every instance of the definition rolls it out.
func (c *Client) SetImage(ctx context.Context, definitionID string, change api.ImageChange) (*api.ImageChanged, error) {
	var out api.ImageChanged
	path := c.WorkloadDefinitions().path(definitionID, "image")
	if err := c.Do(ctx, http.MethodPost, path, nil, nil, change, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CloudAccounts is the cloud_accounts collection.
func (c *Client) CloudAccounts() *Resource[api.CloudAccountSpec, api.CloudAccountStatus] {
	return For[api.CloudAccountSpec, api.CloudAccountStatus](c, api.KindCloudAccount)
}

// Databases is the databases collection.
func (c *Client) Databases() *Resource[api.DatabaseSpec, api.DatabaseStatus] {
	return For[api.DatabaseSpec, api.DatabaseStatus](c, api.KindDatabase)
}

// Buckets is the buckets collection.
func (c *Client) Buckets() *Resource[api.BucketSpec, api.BucketStatus] {
	return For[api.BucketSpec, api.BucketStatus](c, api.KindBucket)
}

// Graph returns the dependency graph: all of it when root is empty, else the objects connected to root
// ("<kind>/<id or name>"), its providers and its consumers, transitively.
func (c *Client) Graph(ctx context.Context, root string) (*api.Graph, error) {
	q := url.Values{}
	if root != "" {
		q.Set("root", root)
	}
	var g api.Graph
	if err := c.Do(ctx, "GET", "/v1/graph", q, nil, nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// RuntimeProfiles is the runtime_profiles collection.
func (c *Client) RuntimeProfiles() *Resource[api.RuntimeProfileSpec, api.RuntimeProfileStatus] {
	return For[api.RuntimeProfileSpec, api.RuntimeProfileStatus](c, api.KindRuntimeProfile)
}

// Plan previews changes: it returns what applying them would do, and changes nothing. A change that the
// real write would refuse fails the plan the same way: a validation error (IsInvalid) names the field
// under "changes[i].", and a delete refused for its dependents is a conflict listing them.
func (c *Client) Plan(ctx context.Context, req api.PlanRequest) (*api.PlanResult, error) {
	var out api.PlanResult
	if err := c.Do(ctx, "POST", "/v1/plans", nil, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Secrets is the secrets collection.
func (c *Client) Secrets() *Resource[api.SecretSpec, api.SecretStatus] {
	return For[api.SecretSpec, api.SecretStatus](c, api.KindSecret)
}

// SupportServices is the support_services collection.
func (c *Client) SupportServices() *Resource[api.SupportServiceSpec, api.SupportServiceStatus] {
	return For[api.SupportServiceSpec, api.SupportServiceStatus](c, api.KindSupportService)
}

// Gateways is the gateways collection.
func (c *Client) Gateways() *Resource[api.GatewaySpec, api.GatewayStatus] {
	return For[api.GatewaySpec, api.GatewayStatus](c, api.KindGateway)
}

// DomainNames is the domain_names collection.
func (c *Client) DomainNames() *Resource[api.DomainNameSpec, api.DomainNameStatus] {
	return For[api.DomainNameSpec, api.DomainNameStatus](c, api.KindDomainName)
}

// Tokens manages API tokens (admin role).
type Tokens struct{ c *Client }

// Tokens returns the token API.
func (c *Client) Tokens() *Tokens { return &Tokens{c: c} }

// Create makes a token and returns it, the only time it is shown.
func (t *Tokens) Create(ctx context.Context, req api.TokenRequest) (*api.NewToken, error) {
	out := new(api.NewToken)
	return out, t.c.Do(ctx, http.MethodPost, "/v1/tokens", nil, nil, req, out)
}

// List returns every token's description, oldest first.
func (t *Tokens) List(ctx context.Context) ([]api.TokenInfo, error) {
	var out struct {
		Items []api.TokenInfo `json:"items"`
	}
	return out.Items, t.c.Do(ctx, http.MethodGet, "/v1/tokens", nil, nil, nil, &out)
}

// Revoke deletes the token with that id; it is refused from then on.
func (t *Tokens) Revoke(ctx context.Context, id string) error {
	return t.c.Do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil, nil, nil)
}

// LastTrace returns the trace of the most recent reconcile of an object of kind (e.g.
// "workload_instance"), from the API server's recent-span buffer. It answers not_found when none is
// recorded (tracing off, or the reconcile ran in another process whose spans this server does not
// hold).
func (c *Client) LastTrace(ctx context.Context, kind, id string) (*api.Trace, error) {
	ki, ok := api.LookupKind(kind)
	if !ok {
		return nil, api.Errorf(api.CodeInvalid, "unknown kind %q", kind)
	}
	var t api.Trace
	if err := c.Do(ctx, http.MethodGet, "/v1/"+ki.Plural+"/"+url.PathEscape(id)+"/trace", nil, nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
