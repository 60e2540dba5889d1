package api

import (
	"time"
)

// Token roles.
const (
	// RoleAdmin may do everything, including managing tokens; it never sees write-only fields.
	RoleAdmin = "admin"
	// RoleDeveloper reads and writes objects.
	RoleDeveloper = "developer"
	// RoleViewer only reads objects.
	RoleViewer = "viewer"
	// RoleController reads objects including write-only fields, writes status, finalizes and events, and
	// writes the objects it creates on behalf of others.
	RoleController = "controller"
)

// Roles lists every token role.
var Roles = []string{RoleAdmin, RoleDeveloper, RoleViewer, RoleController}

// TokenInfo describes an API token. The token itself is shown once, when it is created.
type TokenInfo struct {
	// ID identifies the token, to revoke it.
	ID string `json:"id"`
	// Name says what the token is for, e.g. "ci".
	Name string `json:"name"`
	// Role is admin, developer, viewer or controller.
	Role string `json:"role"`
	// CreatedAt is when the token was made.
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt, when set, is when the token stops being accepted.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// TokenRequest asks for a new token.
type TokenRequest struct {
	// Name says what the token is for (required, a DNS-1123 label).
	Name string `json:"name"`
	// Role is admin, developer, viewer or controller (required).
	Role string `json:"role"`
	// ExpiresAt, when set, is when the token stops being accepted; it must be in the future.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// NewToken is a token just made: its description and, this once, the bearer token itself.
type NewToken struct {
	TokenInfo
	// Token is the bearer token. Only its hash is stored: it cannot be shown again.
	Token string `json:"token"`
}
