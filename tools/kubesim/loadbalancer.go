package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// lbPool is where LoadBalancer ingress addresses come from, as kind with
// MetalLB would hand them out on a docker network.
var lbPool = netip.MustParsePrefix("172.18.255.0/24")

// loadBalancerController gives every Service of type LoadBalancer (with no
// loadBalancerClass) an ingress IP from lbPool, or its spec.loadBalancerIP.
type loadBalancerController struct {
	cs     kubernetes.Interface
	lister corelisters.ServiceLister
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
	// assigned remembers this run's allocations, which the lister may not
	// show yet. One worker, so no lock.
	assigned map[string]string
}

// runLoadBalancerController runs until ctx ends.
func runLoadBalancerController(ctx context.Context, cs kubernetes.Interface, log *slog.Logger) error {
	factory := informers.NewSharedInformerFactory(cs, 10*time.Minute)
	inf := factory.Core().V1().Services()
	c := &loadBalancerController{
		cs:       cs,
		lister:   inf.Lister(),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		log:      log,
		assigned: map[string]string{},
	}
	defer c.queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return ctx.Err()
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.next(ctx) {
	}
	return nil
}

func (c *loadBalancerController) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		c.log.Warn("load balancer sync failed", "service", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *loadBalancerController) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	svc, err := c.lister.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		delete(c.assigned, key)
		return nil
	}
	if err != nil {
		return err
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil ||
		len(svc.Status.LoadBalancer.Ingress) > 0 {
		return nil
	}
	ip, err := c.allocate(svc)
	if err != nil {
		return err
	}
	svc = svc.DeepCopy()
	mode := corev1.LoadBalancerIPModeVIP
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip, IPMode: &mode}}
	if _, err := c.cs.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.assigned[key] = ip
	c.log.Info("load balancer assigned", "service", key, "ip", ip)
	return nil
}

// allocate returns the requested IP, or the lowest pool address that no
// other Service holds.
func (c *loadBalancerController) allocate(svc *corev1.Service) (string, error) {
	if svc.Spec.LoadBalancerIP != "" {
		return svc.Spec.LoadBalancerIP, nil
	}
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return "", err
	}
	used := map[string]bool{}
	for _, ip := range c.assigned {
		used[ip] = true
	}
	for _, s := range all {
		for _, in := range s.Status.LoadBalancer.Ingress {
			used[in.IP] = true
		}
	}
	for a := lbPool.Addr().Next(); lbPool.Contains(a); a = a.Next() {
		if s := a.String(); !used[s] && a != lastAddr(lbPool) {
			return s, nil
		}
	}
	return "", fmt.Errorf("load balancer pool %s is exhausted", lbPool)
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr()
	for n := p.Addr(); p.Contains(n); n = n.Next() {
		a = n
	}
	return a
}
