package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// Roles a token can carry (see the client package for what each may do).
const (
	RoleAdmin      = api.RoleAdmin
	RoleDeveloper  = api.RoleDeveloper
	RoleViewer     = api.RoleViewer
	RoleController = api.RoleController
)

// permission is something a request does; each role holds a set of them.
type permission int

const (
	permRead        permission = iota + 1 // read objects, events, the OpenAPI document
	permWrite                             // create, update, patch, delete objects
	permStatus                            // write status, finalize, append events
	permReadSecrets                       // see write-only spec fields
	permTokens                            // create, list and revoke tokens
)

// rolePerms: write-only fields (kubeconfigs, secret values) are for the controllers that use them, so
// no other role, admin included, ever reads them back.
var rolePerms = map[string][]permission{
	RoleAdmin:     {permRead, permWrite, permStatus, permTokens},
	RoleDeveloper: {permRead, permWrite},
	RoleViewer:    {permRead},
	// Controllers also write objects: those they create on behalf of others (Meta.Owners), and delete
	// when their owners are gone.
	RoleController: {permRead, permWrite, permStatus, permReadSecrets},
}

func roleCan(role string, p permission) bool {
	for _, have := range rolePerms[role] {
		if have == p {
			return true
		}
	}
	return false
}

// HashToken returns the hex SHA-256 of a bearer token, the form in which the store keeps tokens.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken returns a new random bearer token ("qlt_" and 256 random bits).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	return "qlt_" + base64.RawURLEncoding.EncodeToString(b), nil
}

type principal struct {
	name    string
	role    string
	expires *time.Time
}

type principalKey struct{}

func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// tokenCache remembers valid tokens briefly, so that each request does not query the store.
type tokenCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]tokenEntry
}

type tokenEntry struct {
	p       principal
	expires time.Time
}

const maxCachedTokens = 10000

func (c *tokenCache) lookup(ctx context.Context, st store.Store, token string) (principal, error) {
	hash := HashToken(token)
	now := time.Now()
	c.mu.Lock()
	e, ok := c.m[hash]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.p.unexpired(now)
	}
	t, err := st.GetToken(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return principal{}, api.Errorf(api.CodeUnauthorized, "invalid bearer token")
	}
	if err != nil {
		return principal{}, fmt.Errorf("look up token: %w", err)
	}
	p := principal{name: t.Name, role: t.Role, expires: t.ExpiresAt}
	c.mu.Lock()
	if len(c.m) >= maxCachedTokens {
		clear(c.m)
	}
	c.m[hash] = tokenEntry{p: p, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return p.unexpired(now)
}

// unexpired returns p, or 401 when its token has expired.
func (p principal) unexpired(now time.Time) (principal, error) {
	if p.expires != nil && !now.Before(*p.expires) {
		return principal{}, api.Errorf(api.CodeUnauthorized, "bearer token %q expired at %s", p.name, p.expires.Format(time.RFC3339))
	}
	return p, nil
}

// forget drops every remembered token, so that a revoked one is refused at once by this replica (other
// replicas refuse it within TokenCacheTTL).
func (c *tokenCache) forget() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}

// authenticate resolves the bearer token into a principal (401 when missing or wrong).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			s.fail(w, r, api.Errorf(api.CodeUnauthorized, "missing bearer token (Authorization: Bearer <token>)"))
			return
		}
		p, err := s.tokens.lookup(r.Context(), s.cfg.Store, token)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if _, known := rolePerms[p.role]; !known {
			s.fail(w, r, api.Errorf(api.CodeForbidden, "token %q has unknown role %q", p.name, p.role))
			return
		}
		if info, ok := r.Context().Value(requestInfoKey{}).(*requestInfo); ok {
			info.role = p.role
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// require answers 403 unless the caller's role holds the permission.
// require lets a request through when its role has any of the permissions.
func (s *Server) require(ps ...permission) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pr := principalFrom(r.Context())
			for _, p := range ps {
				if roleCan(pr.role, p) {
					next.ServeHTTP(w, r)
					return
				}
			}
			s.fail(w, r, api.Errorf(api.CodeForbidden, "role %q may not %s", pr.role, permVerb[ps[0]]))
		})
	}
}

var permVerb = map[permission]string{
	permRead:        "read objects",
	permWrite:       "create, update or delete objects",
	permStatus:      "write status, finalize or record events",
	permReadSecrets: "read write-only fields",
	permTokens:      "manage tokens",
}
