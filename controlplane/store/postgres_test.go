package store_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store/storetest"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

func openPostgres(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), store.Config{Logger: slog.New(slog.DiscardHandler), URL: pgtest.URL(t)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.Run(t, openPostgres)
}

// TestPostgresWithoutPreparedStatements runs the conformance suite with prepared statements turned off in the
// URL (for a pooler that does not keep them), and checks that a bad value of the parameter is refused by
// name.
func TestPostgresWithoutPreparedStatements(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		t.Helper()
		s, err := store.Open(t.Context(), store.Config{Logger: slog.New(slog.DiscardHandler),
			URL: withParam(pgtest.URL(t), store.PreparedStatementsParam+"=false")})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	})
	_, err := store.Open(t.Context(), store.Config{Logger: slog.New(slog.DiscardHandler),
		URL: withParam(pgtest.URL(t), store.PreparedStatementsParam+"=sometimes")})
	require.ErrorContains(t, err, store.PreparedStatementsParam+` must be true or false, not "sometimes"`)
}

// withParam appends a query parameter to a URL.
func withParam(u, param string) string {
	if strings.Contains(u, "?") {
		return u + "&" + param
	}
	return u + "?" + param
}
