package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// tokenRoutes serves /v1/tokens: create (the token is shown once; only its hash is stored), list and
// revoke. Admin only.
func (s *Server) tokenRoutes(r chi.Router) {
	r.Use(s.authenticate, s.require(permTokens))
	r.Get("/", s.listTokens)
	r.Post("/", s.createToken)
	r.Delete("/{id}", s.revokeToken)
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	data, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.TokenRequest
	if err := decodeStrict(data, &req, ""); err != nil {
		s.fail(w, r, err)
		return
	}
	var fe []api.FieldError
	if req.Name == "" {
		fe = append(fe, api.FieldError{Field: "name", Message: "is required"})
	} else {
		for _, m := range validation.IsDNS1123Label(req.Name) {
			fe = append(fe, api.FieldError{Field: "name", Message: m})
		}
	}
	if !slices.Contains(api.Roles, req.Role) {
		fe = append(fe, api.FieldError{Field: "role", Message: fmt.Sprintf("must be one of %v, not %q", api.Roles, req.Role)})
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(time.Now()) {
		// A lifetime of zero or less (qleet token create --ttl -5s) is refused, never read as "no expiry".
		fe = append(fe, api.FieldError{Field: "expires_at", Message: fmt.Sprintf(
			"must be in the future, not %s: a token's lifetime must be positive (leave expires_at out for a token that never expires)",
			req.ExpiresAt.UTC().Format(time.RFC3339))})
	}
	if len(fe) > 0 {
		s.fail(w, r, api.Invalid(fe...))
		return
	}
	secret, err := NewToken()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t := &store.Token{Hash: HashToken(secret), Name: req.Name, Role: req.Role, ExpiresAt: req.ExpiresAt}
	if err := s.cfg.Store.CreateToken(r.Context(), t); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.NewToken{TokenInfo: tokenInfo(t), Token: secret})
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	ts, err := s.cfg.Store.ListTokens(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	items := make([]api.TokenInfo, len(ts))
	for i, t := range ts {
		items[i] = tokenInfo(t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	err := s.cfg.Store.DeleteToken(r.Context(), chi.URLParam(r, "id"))
	if errors.Is(err, store.ErrNotFound) {
		s.fail(w, r, api.Errorf(api.CodeNotFound, "token %q not found", chi.URLParam(r, "id")))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.tokens.forget()
	w.WriteHeader(http.StatusNoContent)
}

func tokenInfo(t *store.Token) api.TokenInfo {
	return api.TokenInfo{ID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
}
