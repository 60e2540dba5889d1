package suite

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// churnLoad describes a churn window: Rate updates per second of random instances (a changed env var,
// so a new rollout) and a tenth of that in creates of new instances, for Duration, each waited on until
// reconciled (at most WaitLimit).
type churnLoad struct {
	Insts     *client.Resource[api.WorkloadInstanceSpec, api.WorkloadInstanceStatus]
	IDs       []string
	SpecFor   func(int) api.WorkloadInstanceSpec
	Rate      float64
	Duration  time.Duration
	WaitLimit time.Duration
	// Prefix names the created instances (Prefix + a sequence number) and the log lines.
	Prefix string
	Log    *slog.Logger
	// Beside, when set, runs beside each create in a goroutine of its own: the direct alternative at the
	// same rate. It records its own samples with record, and its failures with fail.
	Beside func(ctx context.Context, n int, record func(time.Duration), fail func(string, error))
}

// churnOutcome is what a churn window measured.
type churnOutcome struct {
	Created, Updated, Beside []time.Duration
	Window                   time.Duration
	Errors                   int
}

// runChurn drives l's churn window and returns its samples once every wait has ended.
func runChurn(ctx context.Context, l churnLoad) churnOutcome {
	var (
		mu   sync.Mutex
		out  churnOutcome
		errs atomic.Int64
		wg   sync.WaitGroup
	)
	fail := func(what string, err error) {
		if errs.Add(1) <= 3 {
			l.Log.Warn(l.Prefix+" churn: "+what+" failed", "err", err)
		}
	}
	recorder := func(into *[]time.Duration) func(time.Duration) {
		return func(d time.Duration) {
			mu.Lock()
			*into = append(*into, d)
			mu.Unlock()
		}
	}
	wait := func(id string) error {
		wctx, cancel := context.WithTimeout(ctx, l.WaitLimit)
		defer cancel()
		_, err := l.Insts.WaitReconciled(wctx, id)
		return err
	}
	// timed runs write, then waits for the object it names, and records the whole time.
	timed := func(what string, record func(time.Duration), write func() (string, error)) {
		defer wg.Done()
		t0 := time.Now()
		id, err := write()
		if err != nil {
			fail(what, err)
			return
		}
		if err := wait(id); err != nil {
			fail(what+" wait", err)
			return
		}
		record(time.Since(t0))
	}

	l.Log.Info(l.Prefix+": churn", "updates_per_s", l.Rate, "for", l.Duration)
	upd := time.NewTicker(time.Duration(float64(time.Second) / l.Rate))
	crt := time.NewTicker(time.Duration(float64(time.Second) * 10 / l.Rate))
	defer upd.Stop()
	defer crt.Stop()
	start := time.Now()
	end := start.Add(l.Duration)
	for n := 0; time.Now().Before(end) && ctx.Err() == nil; {
		select {
		case <-upd.C:
			n++
			id, k := l.IDs[rand.IntN(len(l.IDs))], n
			wg.Add(1)
			go timed("update", recorder(&out.Updated), func() (string, error) {
				patch := map[string]any{"spec": map[string]any{"env": []api.EnvVar{{Name: "CHURN", Value: strconv.Itoa(k)}}}}
				_, err := l.Insts.Patch(ctx, id, patch)
				return id, err
			})
		case <-crt.C:
			n++
			k := n
			wg.Add(1)
			go timed("create", recorder(&out.Created), func() (string, error) {
				obj, err := l.Insts.Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: l.Prefix + "churn" + strconv.Itoa(k)}, Spec: l.SpecFor(k)})
				if err != nil {
					return "", err
				}
				return obj.ID, nil
			})
			if l.Beside != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l.Beside(ctx, k, recorder(&out.Beside), fail)
				}()
			}
		case <-ctx.Done():
		}
	}
	upd.Stop()
	crt.Stop()
	out.Window = time.Since(start)
	wg.Wait()
	out.Errors = int(errs.Load())
	return out
}
