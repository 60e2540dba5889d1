package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// check waits for convergence and fills in the report's figures and problems.
func (t *topology) check(ctx context.Context, m *model, rep *Report, since time.Time) error {
	rc, err := clientcmd.BuildConfigFromFlags("", t.cluster.Kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	deadline := since.Add(t.cfg.Wait)
	var lost, orphans []string
	converged := false
	lastLog := time.Now()
	for {
		var live diffCounts
		lost, orphans, live, err = t.diff(ctx, cs, m)
		if err == nil && len(lost) == 0 && len(orphans) == 0 {
			converged = true
			rep.ConvergenceSeconds = time.Since(since).Seconds()
			rep.Instances, rep.Definitions = live.instances, live.defs
			break
		}
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			t.cfg.Logf("%.0fs: %d not yet reflected, %d orphans (%v), e.g. %v", time.Since(since).Seconds(), len(lost), len(orphans), err, first(lost, 3))
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("check: %w", err)
			}
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if !converged {
		rep.ConvergenceSeconds = time.Since(since).Seconds()
		rep.Lost, rep.Orphans = len(lost), len(orphans)
		rep.Problems = append(rep.Problems, fmt.Sprintf("not converged %s after the last restart or write", t.cfg.Wait))
		for _, l := range first(lost, 20) {
			rep.Problems = append(rep.Problems, "lost: "+l)
		}
		for _, o := range first(orphans, 20) {
			rep.Problems = append(rep.Problems, "orphan: "+o)
		}
	} else if rep.ConvergenceSeconds > t.cfg.ConvergeWithin.Seconds() {
		rep.Problems = append(rep.Problems, fmt.Sprintf("converged in %.1fs, over the promised %s", rep.ConvergenceSeconds, t.cfg.ConvergeWithin))
	}

	spans, err := t.lockSpans()
	if err != nil {
		return err
	}
	rep.LockSpans = len(spans)
	overlaps := overlapping(spans)
	rep.Overlaps = len(overlaps)
	for _, o := range first(overlaps, 20) {
		rep.Problems = append(rep.Problems, "overlap: "+o)
	}
	if rep.LockSpans == 0 {
		rep.Problems = append(rep.Problems, "no lock spans were logged: the overlap check saw nothing")
	}
	return nil
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

type diffCounts struct{ instances, defs int }

// diff compares the model with the API and the cluster: lost lists acknowledged writes not (yet)
// reflected, orphans cluster objects whose instance the API does not know.
func (t *topology) diff(ctx context.Context, cs kubernetes.Interface, m *model) (lost, orphans []string, live diffCounts, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	apiInst := map[string]*api.WorkloadInstance{}
	for o, err := range t.cl.WorkloadInstances().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, nil, live, err
		}
		apiInst[o.ID] = o
	}
	apiDefs := map[string]*api.WorkloadDefinition{}
	for o, err := range t.cl.WorkloadDefinitions().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, nil, live, err
		}
		apiDefs[o.ID] = o
	}
	deps, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: kube.ManagedSelector})
	if err != nil {
		return nil, nil, live, err
	}
	byInstance := map[string]int{}
	for i, d := range deps.Items {
		id := d.Labels[kube.LabelInstanceID]
		byInstance[id] = i
		if _, ok := apiInst[id]; !ok {
			orphans = append(orphans, fmt.Sprintf("deployment %s/%s of unknown instance %q", d.Namespace, d.Name, id))
		}
	}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: kube.ManagedSelector})
	if err != nil {
		return nil, nil, live, err
	}
	for _, ns := range nss.Items {
		id, ok := ns.Labels[kube.LabelInstanceID]
		if _, known := apiInst[id]; ok && !known && ns.DeletionTimestamp == nil {
			orphans = append(orphans, fmt.Sprintf("namespace %s of unknown instance %q", ns.Name, id))
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.defs {
		got, ok := apiDefs[d.id]
		switch {
		case d.deleted && ok:
			lost = append(lost, fmt.Sprintf("definition %s (%s) deleted but still in the API", d.name, d.id))
		case !d.deleted && !ok:
			lost = append(lost, fmt.Sprintf("definition %s (%s) missing from the API", d.name, d.id))
		case !d.deleted && got.Spec.Containers[0].Image != d.image:
			lost = append(lost, fmt.Sprintf("definition %s (%s) has image %s, want %s", d.name, d.id, got.Spec.Containers[0].Image, d.image))
		case !d.deleted:
			live.defs++
		}
	}
	for _, in := range m.instances {
		got, ok := apiInst[in.id]
		di, deployed := byInstance[in.id]
		if in.deleted {
			if ok {
				lost = append(lost, fmt.Sprintf("instance %s (%s) deleted but still in the API", in.name, in.id))
			} else if deployed {
				lost = append(lost, fmt.Sprintf("instance %s (%s) deleted but its deployment remains", in.name, in.id))
			}
			continue
		}
		if !ok {
			lost = append(lost, fmt.Sprintf("instance %s (%s) missing from the API", in.name, in.id))
			continue
		}
		st := client.CommonStatus(got)
		switch {
		case got.Spec.Replicas == nil || *got.Spec.Replicas != in.replicas:
			lost = append(lost, fmt.Sprintf("instance %s (%s) has replicas %v in the API, want %d", in.name, in.id, got.Spec.Replicas, in.replicas))
		case st.ObservedGeneration != got.Generation || st.Phase != api.PhaseReady:
			lost = append(lost, fmt.Sprintf("instance %s (%s) not reconciled (%s, observed %d of %d)", in.name, in.id, st.Phase, st.ObservedGeneration, got.Generation))
		case !deployed:
			lost = append(lost, fmt.Sprintf("instance %s (%s) has no deployment", in.name, in.id))
		default:
			d := deps.Items[di]
			image := m.defs[in.defID].image
			if d.Spec.Replicas == nil || *d.Spec.Replicas != in.replicas || d.Status.AvailableReplicas != in.replicas {
				lost = append(lost, fmt.Sprintf("instance %s: deployment has %v replicas (%d available), want %d", in.name, d.Spec.Replicas, d.Status.AvailableReplicas, in.replicas))
			} else if d.Spec.Template.Spec.Containers[0].Image != image {
				lost = append(lost, fmt.Sprintf("instance %s: deployment runs %s, want %s", in.name, d.Spec.Template.Spec.Containers[0].Image, image))
			} else {
				live.instances++
			}
		}
	}
	sort.Strings(lost)
	return lost, orphans, live, nil
}

// span is one hold of an object's lock by one worker, from the lock-span logs.
type span struct {
	key, holder string
	start, end  time.Time
	open        bool // never released: its process was killed (end is the kill) or still runs (end is now)
}

type spanLine struct {
	Event  string    `json:"event"`
	Key    string    `json:"key"`
	Holder string    `json:"holder"`
	At     time.Time `json:"at"`
}

// lockSpans reads every controller's lock-span log into spans.
func (t *topology) lockSpans() ([]span, error) {
	kills := map[int]time.Time{}
	for _, p := range t.controllers {
		p.mu.Lock()
		for pid, at := range p.kills {
			kills[pid] = at
		}
		p.mu.Unlock()
	}
	var spans []span
	for _, path := range t.spanLogs {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		open := map[[2]string]time.Time{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l spanLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				continue // a line cut short by a kill
			}
			k := [2]string{l.Holder, l.Key}
			switch l.Event {
			case "acquired":
				open[k] = l.At
			case "released":
				if start, ok := open[k]; ok {
					spans = append(spans, span{key: l.Key, holder: l.Holder, start: start, end: l.At})
					delete(open, k)
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
		for k, start := range open {
			var pid int
			end := time.Now()
			if _, err := fmt.Sscanf(k[0], "pid %d", &pid); err == nil {
				if at, ok := kills[pid]; ok {
					end = at
				}
			}
			spans = append(spans, span{key: k[1], holder: k[0], start: start, end: end, open: true})
		}
	}
	return spans, nil
}

// overlapping describes every span that began before an earlier span of the same object had ended.
func overlapping(spans []span) []string {
	byKey := map[string][]span{}
	for _, s := range spans {
		byKey[s.key] = append(byKey[s.key], s)
	}
	var out []string
	for key, ss := range byKey {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
		prev := ss[0]
		for _, s := range ss[1:] {
			if s.start.Before(prev.end) {
				out = append(out, fmt.Sprintf("%s held by %q from %s to %s and by %q from %s", key,
					prev.holder, prev.start.Format(time.RFC3339Nano), prev.end.Format(time.RFC3339Nano), s.holder, s.start.Format(time.RFC3339Nano)))
			}
			if s.end.After(prev.end) {
				prev = s
			}
		}
	}
	sort.Strings(out)
	return out
}
