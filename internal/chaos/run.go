package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// run registers the cluster, drives the writes with the kills, and checks the outcome.
func (t *topology) run(ctx context.Context) (*Report, error) {
	cfg := t.cfg
	rep := &Report{Seed: cfg.Seed, Kills: map[string]int{}, WritesByOp: map[string]int{},
		ConvergeWithinSeconds: cfg.ConvergeWithin.Seconds(), Problems: []string{}}
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))

	kc, err := os.ReadFile(t.cluster.Kubeconfig)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	rt, err := t.cl.KubernetesRuntimes().Create(wctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "chaos"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: string(kc)}})
	if err == nil {
		_, err = t.cl.KubernetesRuntimes().WaitReconciled(wctx, rt.ID)
	}
	cancel()
	if err != nil {
		return nil, fmt.Errorf("register the kubesim runtime: %w", err)
	}
	// The agent reports rollouts as they finish, as in a deployment; without it, controllers only poll.
	agentDir := filepath.Join(cfg.WorkDir, "agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		return nil, err
	}
	t.agent = &proc{part: "agent", name: "agent", dir: agentDir, log: filepath.Join(agentDir, "agent.log"),
		env:  []string{"QLEET_TOKEN=" + t.ctrlToken},
		argv: []string{cfg.QleetBinary, "agent", "--runtime", rt.Name, "--endpoint", t.lb.URL(), "--kubeconfig", t.cluster.Kubeconfig}}
	if err := t.agent.start(); err != nil {
		return nil, err
	}

	m := &model{defs: map[string]*defModel{}, instances: map[string]*instModel{}}
	var retries, acked atomic.Int64
	writers := make([]*writer, cfg.Writers)
	for i := range writers {
		writers[i] = &writer{n: i, runtime: rt.ID, cl: t.cl, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i+2))), m: m,
			retries: &retries, acked: &acked, ops: map[string]int{}}
	}
	// Two definitions per writer to start with; these count as writes.
	var defs []*defModel
	for _, w := range writers {
		for range 2 {
			if err := w.createDefinition(ctx, false); err != nil {
				return nil, err
			}
			acked.Add(1)
		}
		defs = append(defs, w.mine...)
	}
	for _, w := range writers {
		w.defs = defs
	}

	// The kills: KillsPerPart of each part in random order, spread evenly over the writes.
	var schedule []string
	for range cfg.KillsPerPart {
		schedule = append(schedule, Parts...)
	}
	rng.Shuffle(len(schedule), func(i, j int) { schedule[i], schedule[j] = schedule[j], schedule[i] })
	gctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	var (
		lastRestart time.Time
		killErr     error
		killWG      sync.WaitGroup
		writesDone  = make(chan struct{})
	)
	killWG.Add(1)
	go func() {
		defer killWG.Done()
		leaderKills := 0
		for i, part := range schedule {
			at := int64((i + 1) * cfg.Writes / (len(schedule) + 1))
		wait:
			for acked.Load() < at {
				select {
				case <-writesDone:
					break wait
				case <-time.After(50 * time.Millisecond):
				}
			}
			group := t.parts(part)
			p := group[rng.IntN(len(group))]
			led := ""
			if part == "nats-leader" {
				// Take turns: a reconcile consumer's leader, then the lock bucket's.
				lp, what, err := t.natsLeader(ctx, leaderKills%2 == 1, rng.IntN)
				leaderKills++
				if err != nil {
					cfg.Logf("no NATS leader found (%v); killing %s instead", err, p.name)
				} else {
					p, led = lp, ", the leader of "+what
				}
			}
			down := max(200*time.Millisecond, time.Duration(rng.Int64N(int64(cfg.Downtime))))
			n := acked.Load()
			pid := p.kill()
			rep.Kills[part]++
			cfg.Logf("kill -9 %s (pid %d%s) at write %d, down %s", p.name, pid, led, n, down.Round(time.Millisecond))
			time.Sleep(down)
			var err error
			if part == "postgres" {
				err = t.pg.startReady(ctx)
			} else {
				err = p.start()
			}
			if err != nil {
				killErr = fmt.Errorf("restart %s: %w", p.name, err)
				stopWriters()
				return
			}
			lastRestart = time.Now()
		}
	}()

	start := time.Now()
	pace := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
	defer pace.Stop()
	for _, w := range writers {
		w.pace = pace.C
	}
	var (
		writersWG sync.WaitGroup
		werrOnce  sync.Once
		werr      error
	)
	per := (cfg.Writes - int(acked.Load())) / cfg.Writers
	for i, w := range writers {
		n := per
		if i == 0 {
			n = cfg.Writes - int(acked.Load()) - per*(cfg.Writers-1)
		}
		writersWG.Add(1)
		go func() {
			defer writersWG.Done()
			if err := w.run(gctx, n); err != nil {
				werrOnce.Do(func() { werr = err; stopWriters() })
			}
		}()
	}
	writersWG.Wait()
	stopWriters()
	close(writesDone)
	killWG.Wait()
	rep.DurationSeconds = time.Since(start).Seconds()
	if killErr != nil {
		return rep, killErr
	}
	if werr != nil {
		return rep, fmt.Errorf("writes: %w", werr)
	}
	rep.Writes = int(acked.Load())
	rep.Retries = int(retries.Load())
	for _, w := range writers {
		for op, n := range w.ops {
			rep.WritesByOp[op] += n
		}
	}
	cfg.Logf("%d writes acknowledged in %s (%d retries); kills %v", rep.Writes, time.Since(start).Round(time.Millisecond), rep.Retries, rep.Kills)

	since := lastRestart
	for _, w := range writers {
		if w.last.After(since) {
			since = w.last
		}
	}
	if err := t.check(ctx, m, rep, since); err != nil {
		return rep, err
	}
	rep.Problems = append(rep.Problems, t.exited()...)
	return rep, nil
}

// exited names the parts that are not running at the end of a run: each killed part was started again,
// so one that is gone exited by itself (a start that gave up while another part was down), and the run
// converged without it.
func (t *topology) exited() []string {
	var gone []string
	procs := append(append(append([]*proc{t.pg.proc, t.agent}, t.nats...), t.apis...), t.controllers...)
	for _, p := range procs {
		if p != nil && !p.running() {
			gone = append(gone, fmt.Sprintf("%s exited by itself: %s", p.name, tail(logTail(p.log), 500)))
		}
	}
	return gone
}
