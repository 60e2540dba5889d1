package suite

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
)

// kubeRig is the cluster, control plane and runtime that the apply and Terraform sections share, so that
// every method of both runs against the same cluster.
type kubeRig struct {
	cluster *benchCluster
	watcher *deployWatcher
	cp      *controlPlane
	runtime *api.KubernetesRuntime
	def     *api.WorkloadDefinition
	// instancesOK is empty when the workload_instance controller reconciles; else why not.
	instancesOK string
}

// rig returns the shared rig, starting it on first use.
func (r *Runner) rig(ctx context.Context) (*kubeRig, error) {
	if r.shared != nil {
		return r.shared, nil
	}
	// kwok nodes take up to 1000 pods each; leave room for every method's workloads at once.
	nodes := max(3, (4*r.cfg.N*r.cfg.Replicas+4*100*r.cfg.Replicas)/800+1)
	r.rigs++
	name := "apply"
	if r.rigs > 1 {
		name = fmt.Sprintf("apply%d", r.rigs) // a fresh cluster and data dir, not the closed rig's
	}
	c, err := r.startCluster(ctx, name, nodes)
	if err != nil {
		return nil, err
	}
	k := &kubeRig{cluster: c}
	ok := false
	defer func() {
		if !ok {
			k.close()
		}
	}()
	if k.watcher, err = startDeployWatcher(ctx, c.kube, ""); err != nil {
		return nil, err
	}
	if k.cp, err = r.startControlPlane(ctx, app.Config{
		DataDir: filepath.Join(r.cfg.WorkDir, "cp-"+name), API: true, Controllers: true,
		KubesimBinary: r.cfg.KubesimBinary,
	}); err != nil {
		return nil, err
	}
	if k.runtime, err = registerRuntime(ctx, k.cp.client, "bench", c); err != nil {
		return nil, err
	}
	if k.def, err = k.cp.client.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{
		Meta: api.Meta{Name: "bench-web"}, Spec: definitionSpec(r.cfg.Replicas),
	}); err != nil {
		return nil, fmt.Errorf("create definition: %w", err)
	}
	k.instancesOK = k.probeInstances(ctx)
	if k.instancesOK != "" {
		r.note("QleetOS workload instances are not reconciled here, so the methods that need them were skipped: %s", k.instancesOK)
	}
	ok = true
	r.shared = k
	return k, nil
}

// probeInstances checks that a workload_instance gets reconciled, and returns why not otherwise.
func (k *kubeRig) probeInstances(ctx context.Context) string {
	insts := k.cp.client.WorkloadInstances()
	inst, err := insts.Create(ctx, &api.WorkloadInstance{
		Meta: api.Meta{Name: "probe"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: k.def.ID, RuntimeID: k.runtime.ID},
	})
	if err != nil {
		return fmt.Sprintf("create workload_instance: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	_, err = insts.WaitReconciled(wctx, inst.ID)
	dctx, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	_ = insts.Delete(dctx, inst.ID, client.DeleteOptions{Wait: true})
	if err != nil {
		return fmt.Sprintf("a probe workload_instance was not reconciled within 90s (%v)", err)
	}
	return ""
}

func (k *kubeRig) close() {
	if k.cp != nil {
		k.cp.close()
	}
	if k.watcher != nil {
		k.watcher.close()
	}
	if k.cluster != nil {
		k.cluster.stop()
	}
}

// waitNamespacesGone waits until none of names exists any more (listing once a second), up to limit.
func (k *kubeRig) waitNamespacesGone(ctx context.Context, names []string, limit time.Duration) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	deadline := time.Now().Add(limit)
	for {
		list, err := k.cluster.kube.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		left := 0
		for _, ns := range list.Items {
			if want[ns.Name] {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d namespaces still present after %s", left, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// deleteNamespaces deletes namespaces (their Deployments go with them).
func (k *kubeRig) deleteNamespaces(ctx context.Context, names []string) {
	for _, n := range names {
		err := k.cluster.kube.Clientset.CoreV1().Namespaces().Delete(ctx, n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			continue
		}
		for _, key := range []string{n + "/" + n} {
			k.watcher.forget(key)
		}
	}
}

// pooledHTTPClient keeps enough idle connections for 64 concurrent requests to one host, and sets no
// overall timeout (server-side waits are long polls).
func pooledHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 512
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: tr}
}

// findKubectl returns kubectl from the config or PATH, installing Debian's package when it is absent
// and this process may. It returns "" and the reason when there is none.
func (r *Runner) findKubectl(ctx context.Context) (string, string) {
	if r.cfg.Kubectl != "" {
		return r.cfg.Kubectl, ""
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p, ""
	}
	r.log.Info("kubectl not found; installing Debian's kubectl package")
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ictx, "apt-get", "install", "-y", "-q", "kubectl").CombinedOutput()
	if err != nil {
		return "", fmt.Sprintf("kubectl is not installed and `apt-get install kubectl` failed: %v: %s", err, lastLine(string(out)))
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p, ""
	}
	return "", "kubectl is not on PATH even after `apt-get install kubectl`"
}
