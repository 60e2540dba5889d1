package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
)

// natsLeader finds the NATS node that leads a part of the reconcile path, asking the cluster through the
// JetStream API: with lock set, the lock bucket's stream; otherwise one of the kinds' reconcile
// consumers, the one at index pick(n) of the n that exist (by name). It retries for up to 15s while
// the part elects a leader (say, after the previous kill). It returns the node and what it leads.
func (t *topology) natsLeader(ctx context.Context, lock bool, pick func(n int) int) (*proc, string, error) {
	nc, err := nats.Connect(t.natsURLs, nats.Name("chaos-leader"), nats.Timeout(2*time.Second))
	if err != nil {
		return nil, "", fmt.Errorf("connect to nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, "", fmt.Errorf("jetstream: %w", err)
	}
	var (
		leader *proc
		what   string
	)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err = poll(pctx, "a NATS leader", func(ctx context.Context) error {
		var cl *jetstream.ClusterInfo
		if lock {
			s, err := js.Stream(ctx, "KV_"+broker.LockBucket)
			if err != nil {
				return err
			}
			cl, what = s.CachedInfo().Cluster, "the lock bucket"
		} else {
			s, err := js.Stream(ctx, broker.StreamName)
			if err != nil {
				return err
			}
			names := s.ConsumerNames(ctx)
			var all []string
			for n := range names.Name() {
				all = append(all, n)
			}
			if err := names.Err(); err != nil {
				return err
			}
			if len(all) == 0 {
				return fmt.Errorf("no consumers on stream %s yet", broker.StreamName)
			}
			slices.Sort(all)
			name := all[pick(len(all))]
			c, err := s.Consumer(ctx, name)
			if err != nil {
				return err
			}
			cl, what = c.CachedInfo().Cluster, "consumer "+name
		}
		if cl == nil || cl.Leader == "" {
			return fmt.Errorf("%s has no leader", what)
		}
		for _, p := range t.nats {
			if p.server == cl.Leader {
				leader = p
				return nil
			}
		}
		return fmt.Errorf("%s is led by %q, not one of ours", what, cl.Leader)
	})
	if err != nil {
		return nil, "", err
	}
	return leader, what, nil
}
