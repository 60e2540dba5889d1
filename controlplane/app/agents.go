package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/agent"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// agents runs one in-process agent per cluster the controllers connect to (runtimes with the same
// connection details share one cluster, and so one agent), so that instance health changes and
// Kubernetes warnings reach the API without polling. An agent starts when the connector opens a
// cluster (kube.ConnectorConfig.OnCluster) and stops when the cluster is closed: no runtime uses it any
// more, its connection details changed, or the control plane stops. Nothing lists the runtimes.
type agents struct {
	cl *client.Client
	// queue, when set, takes the agents' notifications straight to the instance controller's consumer
	// (a publish, like a requeue), instead of a request to the API and its outbox; the API stays the
	// fallback when the publish fails.
	queue interface {
		Publish(ctx context.Context, kind, id, msgID string) error
	}
	log *slog.Logger
	// ctx bounds every agent; cancel ends them (Start does, when its own context ends).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newAgents returns agents bounded by ctx.
func newAgents(ctx context.Context, cl *client.Client, queue interface {
	Publish(ctx context.Context, kind, id, msgID string) error
}, log *slog.Logger) *agents {
	actx, cancel := context.WithCancel(ctx)
	return &agents{cl: cl, queue: queue, log: log, ctx: actx, cancel: cancel}
}

// Start waits until ctx ends, then stops every agent.
func (s *agents) Start(ctx context.Context) error {
	<-ctx.Done()
	s.cancel()
	s.wg.Wait()
	return nil
}

// clusterOpened runs an agent on cl until cl is closed or the agents stop. An agent that cannot start
// (the cluster does not answer yet: a runtime still coming up) tries again with backoff.
func (s *agents) clusterOpened(cl *kube.Cluster, rt *api.KubernetesRuntime) {
	if s.ctx.Err() != nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		go func() {
			select {
			case <-cl.Done():
				cancel()
			case <-ctx.Done():
			}
		}()
		backoff := time.Second
		for ctx.Err() == nil {
			err := s.run(ctx, cl, rt)
			if ctx.Err() != nil {
				return
			}
			s.log.Debug("agent stopped; it starts again", "runtime", rt.Name, "after", backoff, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Minute)
		}
	}()
}

// run runs one agent on cl until ctx ends or it fails.
func (s *agents) run(ctx context.Context, cl *kube.Cluster, rt *api.KubernetesRuntime) error {
	a, err := agent.New(agent.Config{
		Client: s.cl, Cluster: cl, Runtime: rt, Logger: s.log,
		OnChange: func(kind, id string) {
			// Straight to the broker, like a requeue: this agent runs in the controllers' process,
			// and the API's request, transaction and outbox relay were hops on the apply-to-ready
			// path (make bench, apply section). A notification is only a nudge to re-read.
			if s.queue != nil && s.queue.Publish(ctx, kind, id, "") == nil {
				return
			}
			// Through the API and its outbox: a change seen while the broker is down is not lost.
			if err := s.cl.Raw(kind).RequestReconcile(ctx, id); err != nil && ctx.Err() == nil && !api.IsNotFound(err) {
				s.log.Warn("agent: notify the owner", "kind", kind, "id", id, "err", err)
			}
		},
	})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
