package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
)

// TestNATSLeader finds the leaders of the lock bucket and of a consumer on a real three-node cluster
// (embedded servers here, named as the chaos run names its nats-server processes).
func TestNATSLeader(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var routes []string
	var routePorts []int
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		p := l.Addr().(*net.TCPAddr).Port
		require.NoError(t, l.Close())
		routePorts = append(routePorts, p)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	top := &topology{}
	var urls []string
	for i := range 3 {
		// ReadyTimeout: this test runs beside TestChaos, whose builds load the machine; a server once took
		// more than the default 10s to accept connections in `make test`.
		es, err := broker.NewEmbeddedServer(broker.EmbeddedConfig{DataDir: t.TempDir(), ServerName: fmt.Sprintf("n%d", i),
			Cluster: &broker.EmbeddedCluster{Name: "chaos-test", Port: routePorts[i], Routes: routes}, ReadyTimeout: time.Minute})
		require.NoError(t, err)
		require.NoError(t, es.Start(ctx))
		t.Cleanup(es.Stop)
		urls = append(urls, es.ClientURL())
		top.nats = append(top.nats, &proc{part: "nats", name: fmt.Sprintf("nats%d", i), server: fmt.Sprintf("n%d", i)})
	}
	top.natsURLs = strings.Join(urls, ",")

	var b *broker.Broker
	require.NoError(t, poll(ctx, "broker on the cluster", func(ctx context.Context) error {
		var err error
		b, err = broker.Start(ctx, broker.Config{URL: top.natsURLs, Replicas: 3, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		return err
	}))
	t.Cleanup(b.Close)
	for _, kind := range []string{"instances", "gateways"} {
		_, err := b.Consumer(ctx, kind)
		require.NoError(t, err)
	}

	p, what, err := top.natsLeader(ctx, true, nil)
	require.NoError(t, err)
	require.Equal(t, "the lock bucket", what)
	s, err := b.JetStream().Stream(ctx, "KV_"+broker.LockBucket)
	require.NoError(t, err)
	require.Equal(t, s.CachedInfo().Cluster.Leader, p.server)

	p, what, err = top.natsLeader(ctx, false, func(n int) int { return n - 1 })
	require.NoError(t, err)
	require.Equal(t, "consumer "+broker.ConsumerName("instances"), what, "the last by name")
	c, err := b.JetStream().Consumer(ctx, broker.StreamName, broker.ConsumerName("instances"))
	require.NoError(t, err)
	require.Equal(t, c.CachedInfo().Cluster.Leader, p.server)
}
