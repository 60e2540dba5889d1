package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
)

// TestTokenCreateRefusesANonPositiveTTL: `qleet token create --ttl` of zero or less is a usage error
// naming the flag, and makes no token (it once made one that never expires); a positive one works.
func TestTokenCreateRefusesANonPositiveTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := apitest.Start(t)
	admin, err := server.NewToken()
	require.NoError(t, err)
	require.NoError(t, svc.Store.CreateToken(ctx, &store.Token{Hash: server.HashToken(admin), Name: "admin", Role: server.RoleAdmin}))
	env := cliEnv(t, "QLEET_ENDPOINT", svc.URL, "QLEET_TOKEN", admin)
	list := func(t *testing.T) []api.TokenInfo {
		t.Helper()
		cl, err := client.New(svc.URL, client.WithToken(admin))
		require.NoError(t, err)
		toks, err := cl.Tokens().List(ctx)
		require.NoError(t, err)
		return toks
	}

	for _, ttl := range []string{"-5s", "0", "0s", "-720h", "500ms"} {
		t.Run("--ttl "+ttl+" is a usage error and makes no token", func(t *testing.T) {
			r := qleetIn(ctx, env, "token", "create", "--name", "ci", "--role", "developer", "--ttl", ttl)
			require.Equal(t, 2, r.code, r.stdout)
			require.Empty(t, r.stdout)
			require.Contains(t, r.stderr, "--ttl")
			require.Contains(t, r.stderr, "must be at least 1s")
			require.Len(t, list(t), 1, "only the admin token")
		})
	}
	t.Run("no --ttl makes a token that never expires", func(t *testing.T) {
		r := qleetIn(ctx, env, "token", "create", "--name", "forever", "--role", "viewer")
		require.Equal(t, 0, r.code, r.stderr)
		for _, tok := range list(t) {
			if tok.Name == "forever" {
				require.Nil(t, tok.ExpiresAt)
			}
		}
	})
	t.Run("--ttl 1h makes a token that expires in an hour", func(t *testing.T) {
		r := qleetIn(ctx, env, "token", "create", "--name", "ci", "--role", "developer", "--ttl", "1h")
		require.Equal(t, 0, r.code, r.stderr)
		require.True(t, strings.HasPrefix(strings.TrimSpace(r.stdout), "qlt_"), r.stdout)
		var found bool
		for _, tok := range list(t) {
			if tok.Name == "ci" {
				found = true
				require.NotNil(t, tok.ExpiresAt)
				require.WithinDuration(t, time.Now().Add(time.Hour), *tok.ExpiresAt, time.Minute)
			}
		}
		require.True(t, found)
	})
}
