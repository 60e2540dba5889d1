package kube

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// tracingTransport gives each request to a cluster that is made within a trace (a reconcile's) a
// client span, e.g. "k8s PATCH deployments". Requests outside any trace (informers' lists and watches)
// and watches get none, so that background traffic makes no traces of its own.
type tracingTransport struct{ next http.RoundTripper }

// RoundTrip sends req, in a span when it belongs to a trace.
func (t tracingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() || req.URL.Query().Get("watch") == "true" {
		return t.next.RoundTrip(req)
	}
	ctx, span := telemetry.Start(ctx, "k8s "+req.Method+" "+resourceOf(req.URL.Path),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", req.Method),
			attribute.String("url.path", req.URL.Path),
			attribute.String("server.address", req.URL.Host)))
	defer span.End()
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return resp, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, resp.Status)
	}
	return resp, nil
}

// resourceOf names the resource of a Kubernetes API path: /api/v1/namespaces/ns/pods/p -> "pods",
// /apis/apps/v1/namespaces/ns/deployments -> "deployments", /api/v1/namespaces/ns -> "namespaces",
// /apis/apps/v1/namespaces/ns/deployments/d/status -> "deployments/status".
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "namespaces"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}
