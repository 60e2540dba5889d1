// Package agent watches what QleetOS applied to one runtime's cluster and reports back: when an applied
// workload's health changes it asks for the owning instance to be reconciled (which writes replicas and
// pod problems to its status), and it mirrors Kubernetes Warning events about managed objects into
// QleetOS events on the instance. By default one agent runs inside the control plane per runtime; `qleet
// agent` runs it in the cluster with a token (see InstallManifests).
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// Config configures an Agent. Zero values take the documented defaults.
type Config struct {
	// Client records mirrored events on instances (controller role). Nil disables mirroring.
	Client *client.Client
	// Connector connects to Runtime's cluster. Not needed when Cluster is set.
	Connector *kube.Connector
	// Runtime is the runtime to watch. Required.
	Runtime *api.KubernetesRuntime
	// Cluster, when set, is used instead of connecting through Connector (e.g. in-cluster config).
	Cluster *kube.Cluster
	// OnChange is called with an owner's kind and id when the health of an object it applied changes, or
	// when one of its objects is deleted. The kind is the object's kube.LabelOwnerKind (a data service's
	// StatefulSet says "database"); a pod's is its workload's (podOwner); an object that names none is a
	// workload instance's. Warning events about an object are mirrored onto the same owner. A change
	// that decides something is reported at once: a workload's rollout completes (every replica updated and available at its generation) or stops being
	// complete, its spec changes (an edit by hand, put back at once), a pod shows a problem (a
	// container waiting on something other than its creation, an unschedulable or failed pod), or an
	// object is deleted. The progress in between (pods scheduled, started, ready one by one) is coalesced
	// into one call at the end of a Debounce window. May be nil.
	OnChange func(kind, id string)
	// Debounce is how long a rollout's progress is coalesced before it is reported (default
	// DefaultDebounce). Each report costs the owner a reconcile, which only updates the counts in its
	// status; the changes that decide something never wait for it, and one within the window covers the
	// window's progress, so a rollout that completes within it costs no progress report at all.
	Debounce time.Duration
	// EventInterval is the least time between two mirrored events of the same reason about the same
	// object, so that a repeating warning does not flood the instance's events (default 1m).
	EventInterval time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// DefaultDebounce is Config.Debounce's default. At 1s a 3-replica rollout of about 3s cost its instance two
// progress reconciles beside the two that matter (the apply, and the rollout's completion); at 3s it costs
// none (make bench, apply section: reconciles per workload). The window lives in the agent's memory; a
// report lost with it is made up by the instance's own rollout poll.
const DefaultDebounce = 3 * time.Second

// Agent watches one runtime. Create it with New.
type Agent struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	pending  map[string]bool      // owners ("kind\x00id") within their debounce window -> changed since the last call
	mirrored map[string]time.Time // "<object uid>/<reason>" -> when last mirrored
	events   chan api.Event
	synced   chan struct{}
}

// New checks cfg and applies its defaults.
func New(cfg Config) (*Agent, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("agent: Runtime is required")
	}
	if cfg.Cluster == nil && cfg.Connector == nil {
		return nil, errors.New("agent: Connector or Cluster is required")
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.EventInterval <= 0 {
		cfg.EventInterval = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Agent{
		cfg:      cfg,
		log:      cfg.Logger.With("runtime", cfg.Runtime.Name),
		pending:  map[string]bool{},
		mirrored: map[string]time.Time{},
		events:   make(chan api.Event, 256),
		synced:   make(chan struct{}),
	}, nil
}

// informerSet holds the label-selected informers whose caches also resolve events' objects.
type informerSet struct {
	byKind map[string]cache.SharedIndexInformer
}

// Run watches the cluster until ctx ends. It returns an error only when it cannot start.
func (a *Agent) Run(ctx context.Context) error {
	cl := a.cfg.Cluster
	if cl == nil {
		var err error
		if cl, err = a.cfg.Connector.Connect(ctx, a.cfg.Runtime); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	// Workloads and pods come from the cluster's shared cache (one per cluster, however many runtimes
	// and agents point at it); Warning events from a watch of this agent's own.
	c := cl.Cache()
	set := informerSet{byKind: map[string]cache.SharedIndexInformer{}}
	for _, gk := range []schema.GroupKind{kube.DeploymentKind, kube.StatefulSetKind, kube.DaemonSetKind, kube.PodKind} {
		inf, err := c.Informer(ctx, gk, "v1")
		if err != nil {
			return fmt.Errorf("agent: watch %s: %w", gk.Kind, err)
		}
		set.byKind[gk.Kind] = inf
	}
	// The handlers once the set is complete: they read it (podOwner).
	for kind, inf := range set.byKind {
		reg, err := inf.AddEventHandler(a.healthHandler(set))
		if err != nil {
			return fmt.Errorf("agent: watch %s: %w", kind, err)
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
	}
	warnings := informers.NewSharedInformerFactoryWithOptions(cl.Clientset, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "type=" + corev1.EventTypeWarning }),
		informers.WithTransform(kube.Slim))
	evInf := warnings.Core().V1().Events().Informer()
	if _, err := evInf.AddEventHandler(a.eventHandler(ctx, cl, set)); err != nil {
		return fmt.Errorf("agent: watch events: %w", err)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.recordEvents(ctx) }()
	warnings.Start(ctx.Done())
	warnings.WaitForCacheSync(ctx.Done())
	if ctx.Err() == nil {
		close(a.synced)
		a.log.Info("agent watching")
	}
	<-ctx.Done()
	warnings.Shutdown()
	wg.Wait()
	return nil
}

// Synced is closed once the agent's caches are filled: changes and events from then on are reported.
func (a *Agent) Synced() <-chan struct{} { return a.synced }

// healthHandler calls OnChange when an object's health key changes, and when a managed object other
// than a pod is deleted: at once when the change decides something (decisive), else at the end of the
// Debounce window. Objects already present when the agent starts do not trigger.
func (a *Agent) healthHandler(set informerSet) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			if healthKey(oldObj) != healthKey(newObj) {
				a.changed(set, newObj, decisive(oldObj, newObj))
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if _, isPod := obj.(*corev1.Pod); !isPod {
				a.changed(set, obj, true)
			}
		},
	}
}

// decisive reports whether a change of health from oldObj to newObj decides something for its instance,
// so that it is reported at once: a rollout that completes or stops being complete, a spec change (a
// new generation: an edit by hand to put back), or a pod problem that was not there before. The rest is
// a rollout's progress, which only updates the counts in the instance's status.
func decisive(oldObj, newObj any) bool {
	if rolledOut(newObj) != rolledOut(oldObj) {
		return true
	}
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if ok1 && ok2 && o.GetGeneration() != n.GetGeneration() {
		return true
	}
	p := podProblem(newObj)
	return p != "" && p != podProblem(oldObj)
}

// podProblem names what keeps a pod from running, or is empty when nothing does: it failed, the
// scheduler finds no node for it, or a container waits on something other than its own creation
// (ErrImagePull, CrashLoopBackOff, CreateContainerConfigError, ...).
func podProblem(obj any) string {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return ""
	}
	if pod.Status.Phase == corev1.PodFailed {
		return string(corev1.PodFailed)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Reason
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				return cs.Name + ":" + w.Reason
			}
		}
	}
	return ""
}

// changed notes a change of obj's instance. A decisive change calls OnChange at once; the others are
// coalesced into one call at the end of a Debounce window, which a decisive call within it covers.
func (a *Agent) changed(set informerSet, obj any, decisive bool) {
	m, ok := obj.(metav1.Object)
	if !ok || a.cfg.OnChange == nil {
		return
	}
	kind, id := ownerOf(m.GetLabels())
	if pod, ok := obj.(*corev1.Pod); ok {
		kind, id = podOwner(set, pod)
	}
	if id == "" {
		return
	}
	key := kind + "\x00" + id
	a.mu.Lock()
	defer a.mu.Unlock()
	_, open := a.pending[key]
	if decisive {
		if open {
			// The call now sees this change and those before it; only later ones need the window's call.
			a.pending[key] = false
		}
		go a.cfg.OnChange(kind, id)
		return
	}
	a.pending[key] = true
	if open {
		return
	}
	time.AfterFunc(a.cfg.Debounce, func() {
		a.mu.Lock()
		again := a.pending[key]
		delete(a.pending, key)
		a.mu.Unlock()
		if again {
			a.cfg.OnChange(kind, id)
		}
	})
}

// ownerOf returns the kind and id of the owner that an applied object's labels name: its
// kube.LabelOwnerKind, or api.KindWorkloadInstance for an object that names none (pods, which their
// workload's controller labels from the template). The id is empty for an object QleetOS did not apply.
func ownerOf(labels map[string]string) (kind, id string) {
	id = labels[kube.LabelInstanceID]
	if id == "" {
		return "", ""
	}
	return cmp.Or(labels[kube.LabelOwnerKind], api.KindWorkloadInstance), id
}

// podOwner is ownerOf for a pod. A pod's labels come from its workload's template, which names the
// owner's id but not its kind (the kind label stays off templates, so that adding it rolled out no
// data service's pods), so the kind is read from the workload that controls the pod, in the cache: a
// StatefulSet or DaemonSet by name, a Deployment through its ReplicaSet's name (<deployment>-<pod
// template hash>).
func podOwner(set informerSet, pod *corev1.Pod) (kind, id string) {
	kind, id = ownerOf(pod.Labels)
	if id == "" || pod.Labels[kube.LabelOwnerKind] != "" {
		return kind, id
	}
	ctrl := metav1.GetControllerOf(pod)
	if ctrl == nil {
		return kind, id
	}
	wkind, name := ctrl.Kind, ctrl.Name
	if wkind == "ReplicaSet" {
		hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		if hash == "" || !strings.HasSuffix(name, "-"+hash) {
			return kind, id
		}
		wkind, name = "Deployment", strings.TrimSuffix(name, "-"+hash)
	}
	inf, ok := set.byKind[wkind]
	if !ok {
		return kind, id
	}
	obj, exists, err := inf.GetIndexer().GetByKey(pod.Namespace + "/" + name)
	if err != nil || !exists {
		return kind, id
	}
	if m, ok := obj.(metav1.Object); ok {
		if k, wid := ownerOf(m.GetLabels()); wid == id {
			return k, id
		}
	}
	return kind, id
}

// rolledOut reports whether obj is a workload whose status shows its rollout complete: observed at its
// generation, with every desired replica updated, ready and available.
func rolledOut(obj any) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		s, want := o.Status, deref(o.Spec.Replicas)
		return s.ObservedGeneration >= o.Generation && s.Replicas == want && s.UpdatedReplicas == want && s.AvailableReplicas == want
	case *appsv1.StatefulSet:
		s, want := o.Status, deref(o.Spec.Replicas)
		return s.ObservedGeneration >= o.Generation && s.Replicas == want && s.UpdatedReplicas == want && s.AvailableReplicas == want
	case *appsv1.DaemonSet:
		s := o.Status
		return s.ObservedGeneration >= o.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled
	}
	return false
}

// healthKey summarizes what readiness depends on; a change of key is a change of health.
func healthKey(obj any) string {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		s := o.Status
		return fmt.Sprintf("%d/%d/%d/%d/%d/%d/%d", o.Generation, s.ObservedGeneration, deref(o.Spec.Replicas), s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)
	case *appsv1.StatefulSet:
		s := o.Status
		return fmt.Sprintf("%d/%d/%d/%d/%d/%d/%d", o.Generation, s.ObservedGeneration, deref(o.Spec.Replicas), s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)
	case *appsv1.DaemonSet:
		s := o.Status
		return fmt.Sprintf("%d/%d/%d/%d/%d/%d", o.Generation, s.ObservedGeneration, s.DesiredNumberScheduled, s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable)
	case *corev1.Pod:
		var b strings.Builder
		b.WriteString(string(o.Status.Phase))
		for _, c := range o.Status.Conditions {
			if c.Type == corev1.PodScheduled || c.Type == corev1.PodReady {
				fmt.Fprintf(&b, "/%s=%s:%s", c.Type, c.Status, c.Reason)
			}
		}
		for _, cs := range o.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, "/%s:%s", cs.Name, w.Reason)
			}
		}
		return b.String()
	}
	return ""
}

func deref(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// eventHandler mirrors Warning events about managed objects. Events already present when the agent
// starts are not mirrored again; an event seen again (its count grew) is mirrored subject to
// EventInterval.
func (a *Agent) eventHandler(ctx context.Context, cl *kube.Cluster, set informerSet) cache.ResourceEventHandler {
	handle := func(ev *corev1.Event) {
		kind, id := a.ownerOfEvent(ctx, cl, set, ev.InvolvedObject)
		if id == "" {
			return
		}
		key := string(ev.InvolvedObject.UID) + "/" + ev.Reason
		now := time.Now()
		a.mu.Lock()
		if last, ok := a.mirrored[key]; ok && now.Sub(last) < a.cfg.EventInterval {
			a.mu.Unlock()
			return
		}
		a.mirrored[key] = now
		for k, t := range a.mirrored {
			if now.Sub(t) > 10*a.cfg.EventInterval {
				delete(a.mirrored, k)
			}
		}
		a.mu.Unlock()
		e := api.Event{
			ObjectID: id, Kind: kind, Type: api.EventWarning, Reason: ev.Reason,
			Message: fmt.Sprintf("%s %s/%s: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Namespace, ev.InvolvedObject.Name, strings.TrimSpace(ev.Message)),
			Source:  "agent/" + a.cfg.Runtime.Name,
		}
		select {
		case a.events <- e:
		default:
			a.log.Warn("agent event dropped: queue full", "kind", kind, "id", id, "reason", ev.Reason)
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if ev, ok := obj.(*corev1.Event); ok && !initial {
				handle(ev)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Event)
			n, ok2 := newObj.(*corev1.Event)
			if ok1 && ok2 && eventCount(n) > eventCount(o) {
				handle(n)
			}
		},
	}
}

func eventCount(ev *corev1.Event) int32 {
	if ev.Series != nil {
		return ev.Series.Count
	}
	return ev.Count
}

// ownerOfEvent returns the owner (kind and id) of an event's object: from the informer caches for
// workloads and pods, otherwise by reading the object's labels. A data service's pods name their data
// service, so that its warnings reach it rather than a workload instance of the same id.
func (a *Agent) ownerOfEvent(ctx context.Context, cl *kube.Cluster, set informerSet, ref corev1.ObjectReference) (kind, id string) {
	key := ref.Name
	if ref.Namespace != "" {
		key = ref.Namespace + "/" + ref.Name
	}
	if inf, ok := set.byKind[ref.Kind]; ok {
		obj, exists, err := inf.GetIndexer().GetByKey(key)
		if err != nil || !exists {
			return "", ""
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			return podOwner(set, pod)
		}
		if m, ok := obj.(metav1.Object); ok {
			return ownerOf(m.GetLabels())
		}
		return "", ""
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	m, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return "", ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u, err := cl.Dynamic.Resource(m.Resource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil || u.GetLabels()[kube.LabelManagedBy] != kube.ManagedByValue {
		return "", ""
	}
	return ownerOf(u.GetLabels())
}

// recordEvents posts mirrored events until ctx ends.
func (a *Agent) recordEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-a.events:
			if a.cfg.Client == nil {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := a.cfg.Client.Raw(e.Kind).RecordEvent(rctx, e.ObjectID, e)
			cancel()
			if err != nil && ctx.Err() == nil && !api.IsNotFound(err) {
				a.log.Warn("agent event not recorded", "kind", e.Kind, "id", e.ObjectID, "reason", e.Reason, "err", err)
			}
		}
	}
}
