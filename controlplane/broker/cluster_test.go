package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// natsCluster is three embedded nats-servers joined by routes, with clustered JetStream.
type natsCluster struct {
	names []string
	nodes []*broker.EmbeddedServer
}

// startCluster starts three nodes and waits until they accept clients. JetStream elects its meta leader
// afterwards; broker.Start is retried until it has one (see startClusterBroker).
func startCluster(t *testing.T) *natsCluster {
	t.Helper()
	ctx := testCtx(t)
	var routes []string
	var routePorts []int
	for range 3 {
		p := freeTCPPort(t)
		routePorts = append(routePorts, p)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	c := &natsCluster{}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i)
		es, err := broker.NewEmbeddedServer(broker.EmbeddedConfig{
			DataDir: t.TempDir(), ServerName: name, ReadyTimeout: time.Minute, // a busy `make test` can take >10s
			Cluster: &broker.EmbeddedCluster{Name: "qleet-test", Port: routePorts[i], Routes: routes},
		})
		require.NoError(t, err)
		require.NoError(t, es.Start(ctx))
		t.Cleanup(es.Stop)
		c.names = append(c.names, name)
		c.nodes = append(c.nodes, es)
	}
	// A full mesh: every node routes to both others (NATS does not relay between routes).
	await.True(t, 20*time.Second, func() bool {
		for _, n := range c.nodes {
			if remotes, _ := n.Routes(); remotes != 2 {
				return false
			}
		}
		return true
	}, "a full mesh of routes")
	return c
}

// URLs is every node's client URL, comma-separated, as `qleet api --nats-url` takes them.
func (c *natsCluster) URLs() string {
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, n.ClientURL())
	}
	return strings.Join(urls, ",")
}

func (c *natsCluster) index(t *testing.T, name string) int {
	t.Helper()
	for i, n := range c.names {
		if n == name {
			return i
		}
	}
	t.Fatalf("no node named %q", name)
	return -1
}

// startClusterBroker connects to every node of c, retrying while the cluster elects its JetStream leader.
func startClusterBroker(t *testing.T, c *natsCluster, cfg broker.Config) *broker.Broker {
	t.Helper()
	cfg.URL = c.URLs()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	var b *broker.Broker
	await.True(t, 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		b, err = broker.Start(ctx, cfg)
		return err == nil
	}, "broker.Start on the cluster")
	t.Cleanup(b.Close)
	return b
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// leaderOf is the node leading stream (QLEET, or KV_<bucket>), or, with consumer set, that consumer.
func leaderOf(t *testing.T, ctx context.Context, b *broker.Broker, stream, consumer string) string {
	t.Helper()
	var leader string
	await.True(t, 20*time.Second, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if consumer != "" {
			info, err := b.JetStream().Consumer(rctx, stream, consumer)
			if err != nil || info.CachedInfo().Cluster == nil {
				return false
			}
			leader = info.CachedInfo().Cluster.Leader
			return leader != ""
		}
		s, err := b.JetStream().Stream(rctx, stream)
		if err != nil || s.CachedInfo().Cluster == nil {
			return false
		}
		leader = s.CachedInfo().Cluster.Leader
		return leader != ""
	}, "a leader for %s %s", stream, consumer)
	return leader
}

// replicasCurrent reports whether stream (or, with consumer set, that consumer) has a leader and two
// current, online followers.
func replicasCurrent(ctx context.Context, b *broker.Broker, stream, consumer string) bool {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var cl *jetstream.ClusterInfo
	if consumer != "" {
		c, err := b.JetStream().Consumer(rctx, stream, consumer)
		if err != nil {
			return false
		}
		cl = c.CachedInfo().Cluster
	} else {
		s, err := b.JetStream().Stream(rctx, stream)
		if err != nil {
			return false
		}
		cl = s.CachedInfo().Cluster
	}
	if cl == nil || cl.Leader == "" || len(cl.Replicas) != 2 {
		return false
	}
	for _, p := range cl.Replicas {
		if !p.Current || p.Offline {
			return false
		}
	}
	return true
}

const lockStream = "KV_" + broker.LockBucket

func TestCluster(t *testing.T) {
	t.Parallel()

	t.Run("the stream and the lock bucket have three replicas, and a process without a count keeps them", func(t *testing.T) {
		t.Parallel()
		c := startCluster(t)
		ctx := testCtx(t)
		startClusterBroker(t, c, broker.Config{Replicas: 3})
		other := startClusterBroker(t, c, broker.Config{})
		for _, name := range []string{broker.StreamName, lockStream} {
			s, err := other.JetStream().Stream(ctx, name)
			require.NoError(t, err)
			require.Equal(t, 3, s.CachedInfo().Config.Replicas, name)
			await.True(t, 20*time.Second, func() bool { return replicasCurrent(ctx, other, name, "") }, "%s has 3 current replicas", name)
		}
	})

	t.Run("a process started while JetStream has no quorum waits for it instead of failing", func(t *testing.T) {
		t.Parallel()
		c := startCluster(t)
		ctx := testCtx(t)
		startClusterBroker(t, c, broker.Config{Replicas: 3}).Close()
		c.nodes[1].Stop()
		c.nodes[2].Stop()
		started := make(chan error, 1)
		go func() {
			b, err := broker.Start(ctx, broker.Config{URL: c.nodes[0].ClientURL(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err == nil {
				b.Close()
			}
			started <- err
		}()
		// Longer than a request's timeout (4s): before, Start gave up after its first unanswered request.
		select {
		case err := <-started:
			t.Fatalf("Start returned while the stream had no quorum: %v", err)
		case <-time.After(6 * time.Second):
		}
		require.NoError(t, c.nodes[1].Start(ctx))
		require.NoError(t, c.nodes[2].Start(ctx))
		select {
		case err := <-started:
			require.NoError(t, err, "Start, once the cluster has its quorum again")
		case <-ctx.Done():
			t.Fatal("Start did not return once the cluster had its quorum again")
		}
	})

	// Each case stops one node of a fresh cluster mid-flight: the leader of a different part each time.
	const kind = "gateways"
	// Stopping the consumer's leader (or the lock bucket's, which can lead the consumer too) used to stall
	// about half the runs: the consumer info sent right after the fetch saw "server shutdown" reached the
	// consumer while it elected a leader, got no reply (nats-server drops it), and waited out the round's
	// context. The broker's calls now retry an unanswered request every Config.RequestTimeout.
	for _, tc := range []struct{ part, stream, consumer string }{
		{"the stream's leader", broker.StreamName, ""},
		{"the lock bucket's leader", lockStream, ""},
		{"the consumer's leader", broker.StreamName, broker.ConsumerName(kind)},
	} {
		t.Run(fmt.Sprintf("publishing, consuming and locking go on when %s stops", tc.part), func(t *testing.T) {
			t.Parallel()
			c := startCluster(t)
			ctx := testCtx(t)
			// The publisher's broker sets R3; the consumer's, like a `qleet controller` started without a
			// replica count, keeps it.
			pub := startClusterBroker(t, c, broker.Config{Replicas: 3, AckWait: 5 * time.Second})
			sub := startClusterBroker(t, c, broker.Config{AckWait: 5 * time.Second})
			cons, err := sub.Consumer(ctx, kind)
			require.NoError(t, err)
			for _, p := range [][2]string{{broker.StreamName, ""}, {lockStream, ""}, {broker.StreamName, broker.ConsumerName(kind)}} {
				await.True(t, 20*time.Second, func() bool { return replicasCurrent(ctx, sub, p[0], p[1]) }, "%s %s has 3 current replicas", p[0], p[1])
			}
			holder, err := pub.Locker(ctx, broker.LockConfig{TTL: 10 * time.Second, Owner: "pub"})
			require.NoError(t, err)
			contender, err := sub.Locker(ctx, broker.LockConfig{TTL: 10 * time.Second, Owner: "sub"})
			require.NoError(t, err)
			victim := c.index(t, leaderOf(t, ctx, sub, tc.stream, tc.consumer))
			runRound(t, ctx, pub, cons, holder, contender, kind, c.nodes[victim].Stop)
		})
	}
}

// runRound publishes n notifications (each retried, with its message id, until acknowledged) while a
// consumer drains them, and holds a lock while others try to take it; stop runs once a third of the
// notifications are out. Every notification must be consumed, and the held lock granted to nobody else.
func runRound(t *testing.T, ctx context.Context, pub *broker.Broker, cons jetstream.Consumer,
	holder, contender *broker.Locker, kind string, stop func()) {
	t.Helper()
	const n = 150
	rctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()

	// Take the lock before anything stops; contenders hammer it throughout.
	key := broker.LockKey(kind, "locked")
	var held *broker.Lock
	await.True(t, 10*time.Second, func() bool {
		var err error
		held, err = holder.Acquire(rctx, key)
		return err == nil
	}, "acquire %s", key)
	var (
		wg         sync.WaitGroup
		grants     atomic.Int32
		lockLost   atomic.Bool
		contending = make(chan struct{})
	)
	// The holder heartbeats as a reconcile does (TTL/10 here); a refresh may fail while the bucket
	// elects a leader, but the lock must never be lost.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-contending:
				return
			case <-tick.C:
			}
			hctx, hcancel := context.WithTimeout(rctx, 2*time.Second)
			if err := held.Refresh(hctx); errors.Is(err, broker.ErrLockLost) {
				lockLost.Store(true)
			}
			hcancel()
		}
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-contending:
					return
				default:
				}
				actx, acancel := context.WithTimeout(rctx, time.Second)
				lk, err := contender.Acquire(actx, key)
				acancel()
				if err == nil {
					grants.Add(1)
					_ = lk.Release(rctx)
				}
				time.Sleep(20 * time.Millisecond) // no signal: paces the contenders' load on the lock
			}
		}()
	}

	published := make(map[string]bool)
	var stopped sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			id := fmt.Sprintf("n%d", i)
			if i == n/3 {
				stopped.Do(stop)
			}
			for rctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(rctx, 2*time.Second)
				err := pub.Publish(pctx, kind, id, "cluster-"+id)
				pcancel()
				if err == nil {
					break
				}
			}
			published[id] = true
		}
	}()

	consumed := make(map[string]bool)
	deadline := time.Now().Add(40 * time.Second)
	for len(consumed) < n && time.Now().Before(deadline) {
		batch, err := cons.Fetch(50, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Logf("fetch: %v", err)
			time.Sleep(100 * time.Millisecond) // no signal: backs off from a failed fetch while a node is down; the loop has its deadline
			continue
		}
		for m := range batch.Messages() {
			_, id, err := broker.ParseSubject(m.Subject())
			require.NoError(t, err)
			consumed[id] = true
			// An ack lost with a node is redelivered after AckWait, and counted once more, harmlessly.
			actx, acancel := context.WithTimeout(rctx, 2*time.Second)
			_ = m.DoubleAck(actx)
			acancel()
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			ci, cerr := cons.Info(rctx)
			if cerr == nil && ci.Cluster != nil {
				t.Logf("fetch %d/%d: %v; consumer leader %q replicas %+v", len(consumed), n, err, ci.Cluster.Leader, ci.Cluster.Replicas)
			} else {
				t.Logf("fetch %d/%d: %v; consumer info: %v", len(consumed), n, err, cerr)
			}
			time.Sleep(200 * time.Millisecond) // no signal: backs off while the consumer's leader moves; the loop has its deadline
		}
	}

	// The node is down by now; the lock holder still holds its lock, and then releases it.
	close(contending)
	wg.Wait()
	require.False(t, lockLost.Load(), "the holder lost its lock")
	require.Zero(t, grants.Load(), "a held lock was granted to another holder")
	await.True(t, 15*time.Second, func() bool {
		err := held.Release(rctx)
		require.NotErrorIs(t, err, broker.ErrLockLost)
		return err == nil
	}, "release %s", key)
	await.True(t, 15*time.Second, func() bool {
		lk, err := contender.Acquire(rctx, key)
		if err != nil {
			return false
		}
		return lk.Release(rctx) == nil
	}, "another holder takes %s once it is released", key)

	require.Len(t, published, n)
	var lost []string
	for id := range published {
		if !consumed[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		ci, err := cons.Info(ctx)
		require.NoError(t, err)
		t.Fatalf("published but never consumed: %v; the consumer has %d pending, %d unacked, %d redelivered, leader %q",
			lost, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.Cluster.Leader)
	}
	if err := rctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("round ran out of time: %v", err)
	}
}
