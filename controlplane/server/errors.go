package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// storeErrors is the one table that maps the store's sentinel errors to API error codes. The message is
// the store's error text, which carries the detail the store wrapped around the sentinel.
var storeErrors = []struct {
	err  error
	code string
}{
	{store.ErrNotFound, api.CodeNotFound},
	{store.ErrNameTaken, api.CodeConflict},
	{store.ErrStale, api.CodeConflict},
	{store.ErrNotDeleting, api.CodeConflict},
}

// apiError turns any error into the wire error. The second result is false for errors the client did not
// cause (internal errors), which the caller logs.
func apiError(err error) (*api.Error, bool) {
	var ce *api.Error
	if errors.As(err, &ce) {
		return ce, ce.Code != api.CodeInternal
	}
	var de *store.DependentsError
	if errors.As(err, &de) {
		return &api.Error{Code: api.CodeConflict, Message: "object has dependents; delete them first or delete with cascade=true", Dependents: storeRefs(de.Dependents)}, true
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return api.Errorf(api.CodeTooLarge, "request body exceeds %d bytes", mbe.Limit), true
	}
	for _, m := range storeErrors {
		if errors.Is(err, m.err) {
			return &api.Error{Code: m.code, Message: err.Error()}, true
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return api.Errorf(api.CodeUnavailable, "request cancelled or timed out"), true
	}
	if store.Unavailable(err) {
		// Not the client's fault, and not a bug: the database is down, restarting or out of connections.
		// 503 says "retry"; the caller logs it (clientCaused false), since an operator must look.
		return api.Errorf(api.CodeUnavailable, "the database is unavailable; retry shortly"), false
	}
	return api.Errorf(api.CodeInternal, "internal error"), false
}

// retryAfterSeconds is the Retry-After of a 503: how soon a client may try again.
const retryAfterSeconds = "1"

func storeRefs(refs []store.Ref) []api.ObjectRef {
	out := make([]api.ObjectRef, len(refs))
	for i, r := range refs {
		out[i] = api.ObjectRef{Kind: r.Kind, ID: r.ID, Name: r.Name}
	}
	return out
}

// fail writes err as the wire error and logs errors the client did not cause.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae, clientCaused := apiError(err)
	if !clientCaused {
		s.log.ErrorContext(r.Context(), "request failed", slog.String("request_id", requestID(r.Context())), slog.Any("error", err))
	}
	switch ae.Code {
	case api.CodeUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="qleet"`)
	case api.CodeUnavailable:
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	writeJSON(w, api.HTTPStatus(ae.Code), struct {
		Error *api.Error `json:"error"`
	}{ae})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	writeRawJSON(w, status, data)
}

// writeRawJSON writes data, which is JSON already, as the response, with a final newline.
func writeRawJSON(w http.ResponseWriter, status int, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// invalid is a shorthand for a one-field validation error.
func invalid(field, message string) *api.Error {
	return api.Invalid(api.FieldError{Field: field, Message: message})
}
