package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/qleetos/terraform-provider-qleet/api"
)

// TraceSource finds recorded traces. The control plane's recent-span buffer (package
// telemetry/tracing) implements it.
type TraceSource interface {
	// LastReconcile returns the trace of the most recent reconcile of the object, when one is held.
	LastReconcile(objectID string) (*api.Trace, bool)
}

// lastTrace serves GET /v1/<kind>/{id}/trace: the hops of the object's most recent reconcile, from
// this process's recent-span buffer.
func (s *Server) lastTrace(w http.ResponseWriter, r *http.Request) {
	ki, id := kindFrom(r), chi.URLParam(r, "id")
	if _, err := s.cfg.Store.Get(r.Context(), ki.Kind, id); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.cfg.Traces == nil {
		s.fail(w, r, api.Errorf(api.CodeNotFound,
			"tracing is off on this API server (OTEL_SDK_DISABLED, or --trace-buffer 0): no trace is kept"))
		return
	}
	t, ok := s.cfg.Traces.LastReconcile(id)
	if !ok {
		s.fail(w, r, api.Errorf(api.CodeNotFound,
			"no reconcile of %s %q in this server's recent traces (it ran long ago, or in a controller process of its own; see its OTLP collector)", ki.Kind, id))
		return
	}
	writeJSON(w, http.StatusOK, t)
}
