package reconcile

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWaitMessagesNeverSayReady: a wait is never on something Ready, so whatever state a caller passes
// (a dependency's phase as it stands, a phase of an older generation, how it stands elsewhere), the
// status message, the event and the error say what holds the dependency instead.
func TestWaitMessagesNeverSayReady(t *testing.T) {
	t.Parallel()
	ready := regexp.MustCompile(`(?i)\bready\b`)
	for _, tc := range []struct{ state, want string }{
		{"Ready", "its latest change is not reconciled yet"},
		{"ready", "its latest change is not reconciled yet"},
		{"", "not reconciled yet"},
		{`Ready on kubernetes_runtime "eu-1"`, `reconciled on kubernetes_runtime "eu-1"`},
		{"Ready: serving", "reconciled: serving"},
		{"Provisioning", "Provisioning"},
		{"Readying the cluster", "Readying the cluster"},
		{`not on kubernetes_runtime "eu-1" yet`, `not on kubernetes_runtime "eu-1" yet`},
	} {
		var we *WaitError
		require.ErrorAs(t, Wait(`database "orders"`, tc.state, "DataServiceNotReady", 0), &we)
		require.Equal(t, `waiting for database "orders" (`+tc.want+`)`, we.Error(), "state %q", tc.state)
		require.Equal(t, `waiting for database "orders" (`+tc.want+`, 3s)`, we.message(3*time.Second), "state %q", tc.state)
		if tc.state != "Readying the cluster" {
			require.NotRegexp(t, ready, we.Error(), "state %q", tc.state)
		}
	}
}
