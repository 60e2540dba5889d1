package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestConnectorRateLimit checks the client-side limit the controllers' clients get: none by default (the
// API server's Priority and Fairness paces them), and a token bucket only when a QPS is given.
func TestConnectorRateLimit(t *testing.T) {
	t.Parallel()
	limiter := func(cfg ConnectorConfig) (ConnectorConfig, bool) {
		c := NewConnector(cfg)
		// The same fields Connect and open copy into each cluster's rest.Config.
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", QPS: c.cfg.QPS, Burst: c.cfg.Burst})
		require.NoError(t, err)
		return c.cfg, cs.CoreV1().RESTClient().GetRateLimiter() != nil
	}

	cfg, limited := limiter(ConnectorConfig{})
	require.False(t, limited, "no client-side limit by default")
	require.Negative(t, cfg.QPS)

	cfg, limited = limiter(ConnectorConfig{QPS: 50})
	require.True(t, limited)
	require.Equal(t, 100, cfg.Burst, "Burst defaults to twice QPS")

	cfg, limited = limiter(ConnectorConfig{QPS: 50, Burst: 7})
	require.True(t, limited)
	require.Equal(t, 7, cfg.Burst, "a given Burst is kept")
}
