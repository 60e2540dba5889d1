package store_test

import (
	"log/slog"
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
