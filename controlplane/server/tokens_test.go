package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
)

// TestTokenLifetimeMustBePositive: a token whose expiry is not in the future is refused with 400
// naming expires_at, and none is made; a zero or negative lifetime never means "never expires".
func TestTokenLifetimeMustBePositive(t *testing.T) {
	t.Parallel()
	e := setup(t, setupOpts{})
	ctx := context.Background()
	before, err := e.admin.Tokens().List(ctx)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{
		{"a negative lifetime", -5 * time.Second},
		{"a zero lifetime", 0},
		{"an expiry long past", -24 * time.Hour},
	} {
		t.Run(tc.name+" is refused with 400 naming expires_at", func(t *testing.T) {
			exp := time.Now().Add(tc.ttl).UTC().Truncate(time.Second)
			_, err := e.admin.Tokens().Create(ctx, api.TokenRequest{Name: "ci", Role: api.RoleDeveloper, ExpiresAt: &exp})
			require.True(t, api.IsInvalid(err), "%v", err)
			var ce *api.Error
			require.ErrorAs(t, err, &ce)
			require.Len(t, ce.Fields, 1)
			require.Equal(t, "expires_at", ce.Fields[0].Field)
			require.Contains(t, ce.Fields[0].Message, "must be in the future")

			body := fmt.Sprintf(`{"name":"ci","role":"developer","expires_at":%q}`, exp.Format(time.RFC3339))
			code, data := e.raw(t, server.RoleAdmin, http.MethodPost, "/v1/tokens", body, nil)
			require.Equal(t, http.StatusBadRequest, code, string(data))
			require.Contains(t, string(data), `"field":"expires_at"`)
		})
	}
	t.Run("no token was made", func(t *testing.T) {
		after, err := e.admin.Tokens().List(ctx)
		require.NoError(t, err)
		require.Equal(t, len(before), len(after))
	})
	t.Run("a positive lifetime makes a token that expires then", func(t *testing.T) {
		exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		tok, err := e.admin.Tokens().Create(ctx, api.TokenRequest{Name: "ci", Role: api.RoleDeveloper, ExpiresAt: &exp})
		require.NoError(t, err)
		require.NotNil(t, tok.ExpiresAt)
		require.True(t, exp.Equal(*tok.ExpiresAt), "%v", tok.ExpiresAt)
		raw, err := json.Marshal(tok.TokenInfo)
		require.NoError(t, err)
		require.NotContains(t, string(raw), tok.Token)
	})
}
