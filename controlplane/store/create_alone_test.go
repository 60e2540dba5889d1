package store

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A create with no references goes to PostgreSQL as one query string with no BEGIN and COMMIT around it
// when a lane is free: the server runs it as one implicit transaction. A failure in its last insert (the
// outbox row) must leave nothing of the create behind, as in a transaction of its own.
func TestCreateAloneIsOneTransaction(t *testing.T) {
	t.Parallel()
	s := openGroupStore(t, storeURL(t, "postgres"))
	ctx := t.Context()
	// Only this kind's outbox row is refused: its object and label rows go in first.
	_, err := s.wdb.ExecContext(ctx, "ALTER TABLE outbox ADD CONSTRAINT refuse_kind CHECK (kind <> 'refused')")
	require.NoError(t, err)

	s.writes.mu.Lock()
	free := s.writes.free
	s.writes.mu.Unlock()
	require.Positive(t, free, "a lane is free, so the create runs alone")

	p := &CreateParams{Kind: "refused", Name: "half", Labels: map[string]string{"team": "core"},
		Spec: json.RawMessage(`{"replicas":1}`)}
	_, err = s.Create(ctx, p)
	require.ErrorContains(t, err, "refuse_kind")

	_, err = s.GetByName(ctx, "refused", "half")
	require.ErrorIs(t, err, ErrNotFound, "the object row rolled back with the outbox row")
	var labels, counts int
	require.NoError(t, s.wdb.QueryRowContext(ctx, "SELECT count(*) FROM object_labels").Scan(&labels))
	require.Zero(t, labels, "the label row rolled back")
	require.NoError(t, s.wdb.QueryRowContext(ctx, "SELECT count(*) FROM object_counts WHERE kind = 'refused'").Scan(&counts))
	require.Zero(t, counts, "the count trigger's row rolled back")
	require.Empty(t, outboxCount(t, s))

	// The connection it used is clean: the next create, on the same pool, commits.
	p.Kind = "workload_instances"
	obj, err := s.Create(ctx, p)
	require.NoError(t, err)
	require.Equal(t, map[string]int{obj.ID: 1}, outboxCount(t, s))
}
