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

// agents runs one in-process agent per cluster that Ready runtimes point at (runtimes with the same
// connection details share one), so that instance health changes and Kubernetes warnings reach the API
// without polling. It follows the runtimes list every interval.
type agents struct {
	cl *client.Client
	// queue, when set, takes the agents' notifications straight to the instance controller's consumer
	// (a publish, like a requeue), instead of a request to the API and its outbox; the API stays the
	// fallback when the publish fails.
	queue interface {
		Publish(ctx context.Context, kind, id, msgID string) error
	}
	conn     *kube.Connector
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	running map[string]runningAgent // runtime id -> agent
}

type runningAgent struct {
	rv      int64
	cluster *kube.Cluster
	cancel  context.CancelFunc
	done    chan struct{}
}

// Start runs the agents until ctx ends.
func (s *agents) Start(ctx context.Context) error {
	s.run(ctx)
	return nil
}

func (s *agents) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sync(ctx)
		select {
		case <-ctx.Done():
			s.stopAll()
			return
		case <-t.C:
		}
	}
}

// sync starts agents for Ready runtimes and stops those of runtimes that are gone, not Ready, or changed.
func (s *agents) sync(ctx context.Context) {
	want := map[string]*api.KubernetesRuntime{}
	for rt, err := range s.cl.KubernetesRuntimes().All(ctx, client.ListOptions{Limit: 1000}) {
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("agents: list runtimes", "err", err)
			}
			return
		}
		if api.Reconciled(rt.Generation, &rt.Status.Status) && rt.DeletionRequestedAt == nil {
			want[rt.ID] = rt
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ra := range s.running {
		if rt, ok := want[id]; !ok || rt.Generation != ra.rv {
			ra.cancel()
			<-ra.done
			delete(s.running, id)
		}
	}
	served := map[*kube.Cluster]bool{}
	for _, ra := range s.running {
		served[ra.cluster] = true
	}
	for id, rt := range want {
		if _, ok := s.running[id]; ok {
			continue
		}
		cluster, err := s.conn.Connect(ctx, rt)
		if err != nil {
			s.log.Warn("agent: connect", "runtime", rt.Name, "err", err)
			continue
		}
		if served[cluster] {
			continue // another runtime's agent watches this cluster
		}
		served[cluster] = true
		a, err := agent.New(agent.Config{
			Client: s.cl, Cluster: cluster, Runtime: rt, Logger: s.log,
			// Short: the agent's notification sits on the apply-to-ready path of every rollout.
			Debounce: 20 * time.Millisecond,
			OnChange: func(instanceID string) {
				// Straight to the broker, like a requeue: this agent runs in the controllers' process,
				// and the API's request, transaction and outbox relay were hops on the apply-to-ready
				// path (make bench, apply section). A notification is only a nudge to re-read.
				if s.queue != nil && s.queue.Publish(ctx, api.KindWorkloadInstance, instanceID, "") == nil {
					return
				}
				// Through the API and its outbox: a change seen while the broker is down is not lost.
				if err := s.cl.WorkloadInstances().RequestReconcile(ctx, instanceID); err != nil && ctx.Err() == nil && !api.IsNotFound(err) {
					s.log.Warn("agent: notify instance", "id", instanceID, "err", err)
				}
			},
		})
		if err != nil {
			s.log.Warn("agent: start", "runtime", rt.Name, "err", err)
			continue
		}
		actx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := a.Run(actx); err != nil && actx.Err() == nil {
				s.log.Warn("agent stopped", "runtime", rt.Name, "err", err)
			}
		}()
		s.running[id] = runningAgent{rv: rt.Generation, cluster: cluster, cancel: cancel, done: done}
	}
}

func (s *agents) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ra := range s.running {
		ra.cancel()
		<-ra.done
		delete(s.running, id)
	}
}
