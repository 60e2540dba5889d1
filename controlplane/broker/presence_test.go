package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// TestPresenceTellsWhenAPeerGoes: processes sharing a broker hold their presence while they run (their
// refreshes are not taken for a departure), and each learns when another goes: at once when it stops,
// within its TTL when it dies without a word.
func TestPresenceTellsWhenAPeerGoes(t *testing.T) {
	t.Parallel()
	b := startBroker(t, broker.Config{})
	dying := startBroker(t, broker.Config{URL: b.ClientURL()})
	stopping := startBroker(t, broker.Config{URL: b.ClientURL()})
	ctx := testCtx(t)
	kv, err := b.JetStream().KeyValue(ctx, broker.LockBucket)
	require.NoError(t, err)
	members := func() []string {
		keys, err := kv.Keys(ctx)
		if err != nil {
			return nil
		}
		var out []string
		for _, k := range keys {
			if strings.HasPrefix(k, "members.") {
				out = append(out, strings.TrimPrefix(k, "members."))
			}
		}
		return out
	}

	left := make(chan string, 10)
	const ttl = time.Second
	run := func(ctx context.Context, p *broker.Broker, ttl time.Duration, report func(string)) {
		go func() { _ = p.Presence(ctx, broker.PresenceConfig{TTL: ttl, Left: report}) }()
	}
	run(ctx, b, ttl, func(m string) { left <- m })
	await.True(t, 10*time.Second, func() bool { return len(members()) == 1 }, "the watcher announced itself")
	watcher := members()[0]
	run(ctx, dying, ttl, func(string) {})
	await.True(t, 10*time.Second, func() bool { return len(members()) == 2 }, "the peer announced itself")
	var peer string
	for _, m := range members() {
		if m != watcher {
			peer = m
		}
	}

	// no signal: three TTLs in which both refresh; a refresh that failed would expire a key and report it
	time.Sleep(3*ttl + 500*time.Millisecond)
	select {
	case m := <-left:
		t.Fatalf("member %s was reported gone while it ran", m)
	default:
	}
	require.Len(t, members(), 2)

	killed := time.Now()
	dying.Close() // dies without a word: its key expires
	select {
	case m := <-left:
		require.Equal(t, peer, m)
		t.Logf("a dead peer was reported after %s", time.Since(killed).Round(10*time.Millisecond))
		require.Less(t, time.Since(killed), ttl+3*time.Second, "reported within its TTL (plus the server's expiry sweep)")
	case <-time.After(15 * time.Second):
		t.Fatal("a dead peer was not reported")
	}

	// A long TTL for the peer that stops, so that "it said so" and "its key expired" cannot be confused
	// on a busy machine (a 1s TTL was missed by 2ms in `make test`).
	const stoppingTTL = 20 * time.Second
	sctx, stop := context.WithCancel(ctx)
	run(sctx, stopping, stoppingTTL, func(string) {})
	await.True(t, 10*time.Second, func() bool { return len(members()) == 2 }, "the second peer announced itself")
	stopped := time.Now()
	stop()
	select {
	case m := <-left:
		require.NotEqual(t, watcher, m, "a process is never told about itself")
		require.Less(t, time.Since(stopped), stoppingTTL/4, "a peer that stops says so: no wait for its TTL")
	case <-time.After(10 * time.Second):
		t.Fatal("a stopped peer was not reported")
	}
}
