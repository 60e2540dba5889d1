// Package client is the Go client of the QleetOS API: typed per-kind requests over the wire types of
// package api, list iteration, retries of an unavailable API, waits for reconciliation and deletion, and
// typed errors. It imports nothing from Kubernetes.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"go.opentelemetry.io/otel/propagation"
)

// traceContext writes the W3C traceparent of the caller's span on every request.
var traceContext = propagation.TraceContext{}

// Client talks to the QleetOS API. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	token     string
	http      *http.Client
	userAgent string
	// retryFor is how long Do keeps retrying a request the API answered 503 (or a proxy 502/504).
	retryFor time.Duration
}

// DefaultRetryUnavailable is how long a request is retried, by default, while the API answers that it
// is unavailable (503, e.g. its database is down or restarting; a proxy's 502 or 504).
const DefaultRetryUnavailable = 30 * time.Second

// WithRetryUnavailable sets how long a request is retried while the API is unavailable (default
// DefaultRetryUnavailable; zero or negative: never). The retries wait as the API's Retry-After asks
// (at most 5s), or back off from 100ms to 5s, and end with ctx. A request that fails for good returns
// its last error.
func WithRetryUnavailable(d time.Duration) Option {
	return func(c *Client) error { c.retryFor = d; return nil }
}

// Option configures a Client.
type Option func(*Client) error

// WithToken sets the bearer token.
func WithToken(token string) Option {
	return func(c *Client) error { c.token = token; return nil }
}

// WithHTTPClient replaces the HTTP client (default: a client with no overall timeout; use contexts).
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) error { c.http = h; return nil }
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) error { c.userAgent = ua; return nil }
}

// WithCACert trusts the given PEM-encoded CA certificate(s) for TLS endpoints.
func WithCACert(pemData []byte) Option {
	return func(c *Client) error {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return errors.New("ca_cert: no PEM certificate found")
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		c.http = &http.Client{Transport: tr}
		return nil
	}
}

// New returns a client for the API at endpoint, e.g. "http://127.0.0.1:8080".
func New(endpoint string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: must be an absolute http or https URL", endpoint)
	}
	c := &Client{base: u, http: &http.Client{}, userAgent: "qleet-go-client", retryFor: DefaultRetryUnavailable}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Endpoint returns the API base URL.
func (c *Client) Endpoint() string { return c.base.String() }

// Do sends one request. body, when non-nil, is sent as JSON (or as-is when it is json.RawMessage or
// []byte); out, when non-nil, receives the decoded JSON response. API errors come back as *Error.
//
// A request that the API answers 503 (unavailable: its database is down, say), or that a proxy answers
// 502 or 504, is sent again for up to the client's retry time (see WithRetryUnavailable); a connection
// refused is returned at once (the waits ride that out). A create sent again after an answer that was lost may find its name taken (409):
// names are unique, so nothing is ever created twice.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, header http.Header, body, out any) error {
	var data []byte
	if body != nil {
		switch b := body.(type) {
		case json.RawMessage:
			data = b
		case []byte:
			data = b
		default:
			var err error
			if data, err = json.Marshal(body); err != nil {
				return fmt.Errorf("encode request: %w", err)
			}
		}
	}
	var deadline time.Time
	if c.retryFor > 0 {
		deadline = time.Now().Add(c.retryFor)
	}
	var retry backoff
	for {
		after, err := c.do(ctx, method, path, query, header, body != nil, data, out)
		if err == nil || after < 0 || ctx.Err() != nil || !time.Now().Before(deadline) {
			return err
		}
		if !retry.waitAtLeast(ctx, after) {
			return err
		}
	}
}

// do sends one request once. Its duration is how soon it may be sent again (the answer's Retry-After, or
// zero to back off), or negative when sending it again would not help.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, header http.Header, hasBody bool, data []byte, out any) (time.Duration, error) {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return -1, fmt.Errorf("build request: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if hasBody && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	// The caller's trace continues on the server (a reconcile's status write is a child of its span).
	// Without a span in ctx this writes nothing.
	traceContext.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Not retried here: a CLI must say at once that nothing listens; the waits ride it out.
		return -1, fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	respData, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1, fmt.Errorf("%s %s: read response: %w", method, u.Path, err)
	}
	if resp.StatusCode >= 400 {
		after := time.Duration(-1)
		switch resp.StatusCode {
		case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
			after = retryAfter(resp.Header.Get("Retry-After"))
		}
		var env struct {
			Error *api.Error `json:"error"`
		}
		if json.Unmarshal(respData, &env) == nil && env.Error != nil && env.Error.Code != "" {
			return after, env.Error
		}
		msg := strings.TrimSpace(string(respData))
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return after, &api.Error{Code: api.CodeForStatus(resp.StatusCode), Message: fmt.Sprintf("%s %s: HTTP %d: %s", method, u.Path, resp.StatusCode, msg)}
	}
	if out != nil && len(respData) > 0 {
		if err := json.Unmarshal(respData, out); err != nil {
			return -1, fmt.Errorf("%s %s: decode response: %w", method, u.Path, err)
		}
	}
	return 0, nil
}

// retryAfter reads a Retry-After header given in seconds (at most 5s); zero when absent or a date.
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, 5*time.Second)
}

// Resource is the typed API of one kind. Get one from a Client accessor such as KubernetesRuntimes.
type Resource[S any, T any] struct {
	c    *Client
	kind string
}

// For returns the typed resource of a kind. The accessors below cover the built-in kinds.
func For[S any, T any](c *Client, kind string) *Resource[S, T] {
	return &Resource[S, T]{c: c, kind: kind}
}

// KubernetesRuntimes is the kubernetes_runtimes collection.
func (c *Client) KubernetesRuntimes() *Resource[api.KubernetesRuntimeSpec, api.KubernetesRuntimeStatus] {
	return For[api.KubernetesRuntimeSpec, api.KubernetesRuntimeStatus](c, api.KindKubernetesRuntime)
}

// WorkloadDefinitions is the workload_definitions collection.
func (c *Client) WorkloadDefinitions() *Resource[api.WorkloadDefinitionSpec, api.WorkloadDefinitionStatus] {
	return For[api.WorkloadDefinitionSpec, api.WorkloadDefinitionStatus](c, api.KindWorkloadDefinition)
}

// WorkloadInstances is the workload_instances collection.
func (c *Client) WorkloadInstances() *Resource[api.WorkloadInstanceSpec, api.WorkloadInstanceStatus] {
	return For[api.WorkloadInstanceSpec, api.WorkloadInstanceStatus](c, api.KindWorkloadInstance)
}

// Raw returns an untyped view of any kind, for generic tools such as the CLI.
func (c *Client) Raw(kind string) *Resource[json.RawMessage, json.RawMessage] {
	return For[json.RawMessage, json.RawMessage](c, kind)
}

// Kind returns the singular kind name.
func (r *Resource[S, T]) Kind() string { return r.kind }

func (r *Resource[S, T]) path(parts ...string) string {
	p := "/v1/" + api.Plural(r.kind)
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

func ifMatch(rv int64) http.Header {
	if rv == 0 {
		return nil
	}
	return http.Header{"If-Match": {strconv.FormatInt(rv, 10)}}
}

type writeBody[S any] struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Owners []api.ObjectRef   `json:"owners,omitempty"`
	Spec   S                 `json:"spec"`
}

// Create creates the object from its name, labels, owners and spec.
func (r *Resource[S, T]) Create(ctx context.Context, obj *api.Object[S, T]) (*api.Object[S, T], error) {
	out := new(api.Object[S, T])
	err := r.c.Do(ctx, http.MethodPost, r.path(), nil, nil, writeBody[S]{obj.Name, obj.Labels, obj.Owners, obj.Spec}, out)
	return out, err
}

// Client returns the client this resource talks through.
func (r *Resource[S, T]) Client() *Client { return r.c }

// Get returns the object with the given id.
func (r *Resource[S, T]) Get(ctx context.Context, id string) (*api.Object[S, T], error) {
	out := new(api.Object[S, T])
	return out, r.c.Do(ctx, http.MethodGet, r.path(id), nil, nil, nil, out)
}

// GetByName returns the object with the given name.
func (r *Resource[S, T]) GetByName(ctx context.Context, name string) (*api.Object[S, T], error) {
	out := new(api.Object[S, T])
	return out, r.c.Do(ctx, http.MethodGet, r.path("by-name", name), nil, nil, nil, out)
}

// ListOptions filter and page a list.
type ListOptions struct {
	// LabelSelector is "k=v,k2=v2"; only objects carrying every pair are listed.
	LabelSelector string
	// References is an object id; only objects that reference it, or that their spec attaches to it, are
	// listed (a definition's instances, the secrets that serve an instance), from the store's indexes.
	References string
	// Pending lists only the objects that are not reconciled (deletion requested, not Ready, or Ready at
	// an older generation), from the store's index of them: what a safety-net pass looks at.
	Pending bool
	// Owned lists only the objects that a controller created for owners (Meta.Owners).
	Owned bool
	// Limit is the page size (server default 100, maximum 1000).
	Limit int
	// Continue is the token from the previous page.
	Continue string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.LabelSelector != "" {
		q.Set("label_selector", o.LabelSelector)
	}
	if o.References != "" {
		q.Set("references", o.References)
	}
	if o.Pending {
		q.Set("pending", "true")
	}
	if o.Owned {
		q.Set("owned", "true")
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Continue != "" {
		q.Set("continue", o.Continue)
	}
	return q
}

// List returns one page of objects.
func (r *Resource[S, T]) List(ctx context.Context, opts ListOptions) (*api.List[S, T], error) {
	out := new(api.List[S, T])
	return out, r.c.Do(ctx, http.MethodGet, r.path(), opts.query(), nil, nil, out)
}

// Count returns how many objects match opts over all pages (Limit and Continue are ignored), counted
// by the server from its indexes without sending them.
func (r *Resource[S, T]) Count(ctx context.Context, opts ListOptions) (int, error) {
	opts.Limit, opts.Continue = 0, ""
	var out api.Count
	err := r.c.Do(ctx, http.MethodGet, r.path("count"), opts.query(), nil, nil, &out)
	return out.Count, err
}

// All iterates over every object matching opts, following continue tokens.
func (r *Resource[S, T]) All(ctx context.Context, opts ListOptions) iter.Seq2[*api.Object[S, T], error] {
	return func(yield func(*api.Object[S, T], error) bool) {
		for {
			page, err := r.List(ctx, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range page.Items {
				if !yield(&page.Items[i], nil) {
					return
				}
			}
			if page.Continue == "" {
				return
			}
			opts.Continue = page.Continue
		}
	}
}

// Update replaces the object's labels and spec. A non-zero obj.ResourceVersion is sent as If-Match,
// so a concurrent write makes it fail with a conflict.
func (r *Resource[S, T]) Update(ctx context.Context, obj *api.Object[S, T]) (*api.Object[S, T], error) {
	out := new(api.Object[S, T])
	err := r.c.Do(ctx, http.MethodPut, r.path(obj.ID), nil, ifMatch(obj.ResourceVersion), writeBody[S]{obj.Name, obj.Labels, obj.Owners, obj.Spec}, out)
	return out, err
}

// Patch applies a JSON merge patch (RFC 7396) to {"labels":..., "spec":...}.
func (r *Resource[S, T]) Patch(ctx context.Context, id string, patch any) (*api.Object[S, T], error) {
	out := new(api.Object[S, T])
	h := http.Header{"Content-Type": {"application/merge-patch+json"}}
	return out, r.c.Do(ctx, http.MethodPatch, r.path(id), nil, h, patch, out)
}

// DeleteOptions control a delete.
type DeleteOptions struct {
	// Cascade deletes the objects that depend on this one first, instead of answering 409.
	Cascade bool
	// Wait blocks until the object is gone (or ctx ends).
	Wait bool
	// Orphan abandons what the object made in the compute space (a workload's objects in a cluster that
	// is gone or unreachable) instead of cleaning it up. It may be given for an object whose deletion is
	// already under way.
	Orphan bool
	// Detach deletes a database or bucket even though the instance its own spec.instance_id names still
	// uses it: the instance loses it. Without it that delete answers 409, as for one the instance lists.
	// Terraform deletes with it, because removing the resource from the configuration asks exactly that.
	Detach bool
}

// Delete requests deletion. Controllers clean up and then the object goes. With opts.Wait it returns once
// the object is gone.
func (r *Resource[S, T]) Delete(ctx context.Context, id string, opts DeleteOptions) error {
	q := url.Values{}
	if opts.Cascade {
		q.Set("cascade", "true")
	}
	if opts.Orphan {
		q.Set("orphan", "true")
	}
	if opts.Detach {
		q.Set("detach", "true")
	}
	if err := r.c.Do(ctx, http.MethodDelete, r.path(id), q, nil, nil, nil); err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !opts.Wait {
		return nil
	}
	return r.WaitGone(ctx, id)
}

// WaitGone blocks until the object no longer exists. Like WaitReconciled, it rides out a control plane
// that cannot be reached for a while.
func (r *Resource[S, T]) WaitGone(ctx context.Context, id string) error {
	var retry backoff
	for {
		q := url.Values{"wait": {"gone"}, "timeout": {"30s"}}
		err := r.c.Do(ctx, http.MethodGet, r.path(id), q, nil, nil, nil)
		if api.IsNotFound(err) {
			return nil
		}
		if err != nil && ctx.Err() == nil && unreachable(err) && retry.wait(ctx) {
			continue
		}
		retry.reset()
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for %s %s to be deleted: %w", r.kind, id, err)
		}
	}
}

// UpdateStatus writes the status (controller role). rv is sent as If-Match; a stale one fails with a conflict.
func (r *Resource[S, T]) UpdateStatus(ctx context.Context, id string, rv int64, status T) (*api.Object[S, T], error) {
	out := new(api.Object[S, T])
	return out, r.c.Do(ctx, http.MethodPut, r.path(id, "status"), nil, ifMatch(rv), status, out)
}

// Finalize removes an object whose deletion was requested, once its controller has cleaned up (controller role).
func (r *Resource[S, T]) Finalize(ctx context.Context, id string) error {
	return r.c.Do(ctx, http.MethodPost, r.path(id, "finalize"), nil, nil, nil, nil)
}

// RequestReconcile asks the object's controller to reconcile it now, without changing it.
func (r *Resource[S, T]) RequestReconcile(ctx context.Context, id string) error {
	return r.c.Do(ctx, http.MethodPost, r.path(id, "reconcile"), nil, nil, nil, nil)
}

// Events lists the object's events, newest last.
func (r *Resource[S, T]) Events(ctx context.Context, id string) ([]api.Event, error) {
	var out struct {
		Items []api.Event `json:"items"`
	}
	return out.Items, r.c.Do(ctx, http.MethodGet, r.path(id, "events"), nil, nil, nil, &out)
}

// RecordEvent appends an event to the object (controller role).
func (r *Resource[S, T]) RecordEvent(ctx context.Context, id string, ev api.Event) error {
	return r.c.Do(ctx, http.MethodPost, r.path(id, "events"), nil, nil, ev, nil)
}

// FailedError is returned by WaitReconciled when the object went Failed at its current generation.
type FailedError struct {
	// Kind and Name identify the object.
	Kind, Name string
	// Status is the common status at the time of failure.
	Status api.Status
	// Stalled, when set, says the object did not go Failed but its rollout stalled: it made no progress
	// within its deadline, for the condition's reason.
	Stalled *api.Condition
}

func (e *FailedError) Error() string {
	msg := fmt.Sprintf("%s %q failed: %s", e.Kind, e.Name, e.Status.Message)
	if e.Stalled != nil {
		msg = fmt.Sprintf("%s %q stalled (%s): %s", e.Kind, e.Name, e.Stalled.Reason, e.Stalled.Message)
	}
	for _, c := range e.Status.Conditions {
		if c.Status != api.ConditionTrue && c.Message != "" && c.Message != e.Status.Message {
			msg += fmt.Sprintf("; %s: %s", c.Type, c.Message)
		}
	}
	return msg
}

// IsFailed reports whether err says the object went Failed.
func IsFailed(err error) bool {
	var f *FailedError
	return errors.As(err, &f)
}

// WaitReconciled blocks until the object is reconciled (phase Ready at its current generation) and returns
// it. It returns at once with a *FailedError when the object goes Failed, or Stalled, at its current
// generation, and with ctx's error (wrapped with the last status) when ctx ends first. It uses the
// server-side wait, so it does not poll. A control plane that cannot be reached for a while (restarting,
// behind a load balancer answering 502-504) is retried with backoff until ctx ends.
func (r *Resource[S, T]) WaitReconciled(ctx context.Context, id string) (*api.Object[S, T], error) {
	var last *api.Object[S, T]
	var retry backoff
	for {
		timeout := 30 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			// The server answers a little before ctx ends, so that the caller gets the latest status.
			if left := time.Until(dl); left < timeout {
				timeout = max(left-min(time.Second, left/5), 10*time.Millisecond)
			}
		}
		q := url.Values{"wait": {"reconciled"}, "timeout": {timeout.String()}}
		obj := new(api.Object[S, T])
		err := r.c.Do(ctx, http.MethodGet, r.path(id), q, nil, nil, obj)
		if err != nil && ctx.Err() == nil && unreachable(err) && retry.wait(ctx) {
			continue
		}
		retry.reset()
		if err != nil {
			if ctx.Err() != nil && last != nil {
				return last, fmt.Errorf("waiting for %s %q: %w (last phase %s: %s)", r.kind, last.Name, ctx.Err(), statusOf(last).Phase, statusOf(last).Message)
			}
			return last, err
		}
		last = obj
		st := statusOf(obj)
		if api.Reconciled(obj.Generation, st) {
			return obj, nil
		}
		if st.Phase == api.PhaseFailed && st.ObservedGeneration == obj.Generation {
			return obj, &FailedError{Kind: r.kind, Name: obj.Name, Status: *st}
		}
		if c := api.StalledCondition(obj.Generation, st); c != nil {
			return obj, &FailedError{Kind: r.kind, Name: obj.Name, Status: *st, Stalled: c}
		}
		if err := ctx.Err(); err != nil {
			return obj, fmt.Errorf("waiting for %s %q: %w (last phase %s: %s)", r.kind, obj.Name, err, st.Phase, st.Message)
		}
	}
}

// statusOf extracts the common status of any object, typed or raw.
func statusOf[S any, T any](obj *api.Object[S, T]) *api.Status {
	if a, ok := any(&obj.Status).(api.StatusAccessor); ok {
		return a.Common()
	}
	st := new(api.Status)
	if raw, ok := any(obj.Status).(json.RawMessage); ok && len(raw) > 0 {
		_ = json.Unmarshal(raw, st)
	}
	return st
}

// CommonStatus returns the common status fields of any object, typed or raw.
func CommonStatus[S any, T any](obj *api.Object[S, T]) *api.Status { return statusOf(obj) }

// unreachable reports whether err says the control plane could not be reached or answered that it is
// unavailable: a transport error (connection refused or reset, EOF) or 502, 503 or 504.
func unreachable(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) || api.ErrorCode(err) == api.CodeUnavailable
}

// backoff paces retries of an unreachable control plane: 100ms, doubling to 5s.
type backoff struct{ next time.Duration }

// wait sleeps the next delay and reports true, or reports false when ctx ends first.
func (b *backoff) wait(ctx context.Context) bool {
	b.next = min(max(2*b.next, 100*time.Millisecond), 5*time.Second)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(b.next):
		return true
	}
}

// waitAtLeast is wait, sleeping at least d.
func (b *backoff) waitAtLeast(ctx context.Context, d time.Duration) bool {
	b.next = min(max(2*b.next, 100*time.Millisecond, d), 5*time.Second)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(b.next):
		return true
	}
}

func (b *backoff) reset() { b.next = 0 }
