package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// storeErrors is the one table that maps the store's sentinel errors to API error codes. The message is
// the store's error text, which carries the detail the store wrapped around the sentinel.
var storeErrors = []struct {
	err  error
	code string
}{
	{store.ErrNotFound, client.CodeNotFound},
	{store.ErrNameTaken, client.CodeConflict},
	{store.ErrStale, client.CodeConflict},
	{store.ErrNotDeleting, client.CodeConflict},
}

// apiError turns any error into the wire error. The second result is false for errors the client did not
// cause (internal errors), which the caller logs.
func apiError(err error) (*client.Error, bool) {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce, ce.Code != client.CodeInternal
	}
	var de *store.DependentsError
	if errors.As(err, &de) {
		return &client.Error{Code: client.CodeConflict, Message: "object has dependents; delete them first or delete with cascade=true", Dependents: storeRefs(de.Dependents)}, true
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return client.Errorf(client.CodeTooLarge, "request body exceeds %d bytes", mbe.Limit), true
	}
	for _, m := range storeErrors {
		if errors.Is(err, m.err) {
			return &client.Error{Code: m.code, Message: err.Error()}, true
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return client.Errorf(client.CodeUnavailable, "request cancelled or timed out"), true
	}
	return client.Errorf(client.CodeInternal, "internal error"), false
}

func storeRefs(refs []store.Ref) []client.ObjectRef {
	out := make([]client.ObjectRef, len(refs))
	for i, r := range refs {
		out[i] = client.ObjectRef{Kind: r.Kind, ID: r.ID, Name: r.Name}
	}
	return out
}

// fail writes err as the wire error and logs errors the client did not cause.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae, clientCaused := apiError(err)
	if !clientCaused {
		s.log.ErrorContext(r.Context(), "request failed", slog.String("request_id", requestID(r.Context())), slog.Any("error", err))
	}
	if ae.Code == client.CodeUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qleet"`)
	}
	writeJSON(w, client.HTTPStatus(ae.Code), struct {
		Error *client.Error `json:"error"`
	}{ae})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// invalid is a shorthand for a one-field validation error.
func invalid(field, message string) *client.Error {
	return client.Invalid(client.FieldError{Field: field, Message: message})
}
