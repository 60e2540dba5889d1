package store_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store/storetest"
)

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), store.Config{Logger: slog.New(slog.DiscardHandler), URL: "sqlite://" + filepath.Join(t.TempDir(), "qleet.db")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, openSQLite)
}
