package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

const (
	serviceCIDR          = "10.96.0.0/16"
	kubernetesServiceIP  = "10.96.0.1"
	podCIDR              = "10.244.0.0/16"
	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
)

// layout names everything the parts need: ports and files.
type layout struct {
	dir   dataDir
	pki   *clusterPKI
	state state
}

func (l layout) endpoint() string {
	return fmt.Sprintf("https://127.0.0.1:%d", l.state.APIServerPort)
}

func (l layout) componentKubeconfig(part string) string {
	return l.dir.path("pki", part+".kubeconfig")
}

// apiServerArgs: loopback only; RBAC; no endpoint reconciler, because the
// only address is loopback, which Endpoints refuse.
func (l layout) apiServerArgs() []string {
	p := l.pki
	return []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(l.state.APIServerPort),
		"--etcd-servers=https://127.0.0.1:" + strconv.Itoa(l.state.EtcdClientPort),
		"--etcd-cafile=" + p.cert("ca"),
		"--etcd-certfile=" + p.cert("apiserver-etcd-client"),
		"--etcd-keyfile=" + p.key("apiserver-etcd-client"),
		"--tls-cert-file=" + p.cert("apiserver"),
		"--tls-private-key-file=" + p.key("apiserver"),
		"--client-ca-file=" + p.cert("ca"),
		"--cert-dir=" + l.dir.path("pki", "apiserver-generated"),
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + l.dir.path("pki", "sa.pub"),
		"--service-account-signing-key-file=" + l.dir.path("pki", "sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=RBAC",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
		// A local cluster has one client that matters; the max-in-flight
		// limits are enough, and APF's controller and flow-schema state cost
		// memory.
		"--enable-priority-and-fairness=false",
		// New nodes get no not-ready taint: only the node lifecycle controller, which kubesim does not
		// run (see controllers), would ever lift it.
		"--disable-admission-plugins=TaintNodesByCondition",
	}
}

// controllerManagerArgs: no serving port (health is seen through the API),
// no leader election (one replica), per-controller service accounts as
// kubeadm does, and a client rate and worker counts high enough for large
// rollouts.
func (l layout) controllerManagerArgs() []string {
	kc := l.componentKubeconfig(partControllerManager)
	p := l.pki
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + l.dir.path("pki", "sa.key"),
		"--root-ca-file=" + p.cert("ca"),
		"--cluster-signing-cert-file=" + p.cert("ca"),
		"--cluster-signing-key-file=" + p.key("ca"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--profiling=false",
		"--controllers=" + strings.Join(controllers, ","),
		// The default 5 workers each keep the Deployment and ReplicaSet controllers latency-bound when
		// thousands of workloads roll out at once (make bench's scale section), not CPU-bound.
		"--concurrent-deployment-syncs=20",
		"--concurrent-replicaset-syncs=20",
		// Simulated pod metrics are written every 5s: the autoscaler looks as often, and counts a new
		// pod's usage once it has been Ready for 10s.
		"--horizontal-pod-autoscaler-sync-period=5s",
		"--horizontal-pod-autoscaler-cpu-initialization-period=10s",
	}
}

// controllers: every default controller but those with nothing to do when
// kwok plays the nodes: no kubelet asks for certificates or reads the node
// TTL annotation, no node needs a pod CIDR or fails, and no volume is
// attached or resized.
var controllers = []string{
	"*",
	"-certificatesigningrequest-signing-controller",
	"-certificatesigningrequest-approving-controller",
	"-certificatesigningrequest-cleaner-controller",
	"-node-ipam-controller",
	"-ttl-controller",
	"-persistentvolume-attach-detach-controller",
	"-persistentvolume-expander-controller",
	// kwok renews node status every 20-45s, and later still when it is busy with thousands of pods,
	// and writes no node Leases: the node lifecycle controller marked nodes NotReady between beats
	// (even with a 5m grace, under make bench's scale section) and set their pods Ready=False, which
	// kwok never sets back. kwok's nodes do not fail, so nothing is lost without it.
	"-node-lifecycle-controller",
}

func (l layout) schedulerArgs() []string {
	kc := l.componentKubeconfig(partScheduler)
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--secure-port=0",
		"--leader-elect=false",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--profiling=false",
	}
}

// kwokArgs are the flags of kwok, which runs inside the supervisor.
func (l layout) kwokArgs() []string {
	return []string{
		"--kubeconfig=" + l.componentKubeconfig(partKwok),
		"--manage-all-nodes=true",
		"--cidr=" + podCIDR,
		"--node-ip=10.0.0.1",
	}
}

// writeKubeconfigs writes the admin kubeconfig and one per component.
func (l layout) writeKubeconfigs(name string) error {
	if err := writeKubeconfig(l.dir.path("kubeconfig"), name, l.endpoint(), l.pki, "admin"); err != nil {
		return err
	}
	for part, cert := range map[string]string{
		partControllerManager: "controller-manager",
		partScheduler:         "scheduler",
		partKwok:              "kwok",
	} {
		if err := writeKubeconfig(l.componentKubeconfig(part), name, l.endpoint(), l.pki, cert); err != nil {
			return err
		}
	}
	return nil
}

// Garbage-collector tuning. Start-up allocates most (the API server builds
// its OpenAPI models and type converters), so every process starts with Go's
// default GOGC (100) and start-up stays as fast as before. Once the cluster
// is ready, the supervisor tells each process to collect more often: GOGC 100
// lets the heap grow to twice what is live, 50 by half, 25 by a quarter. This
// costs some GC CPU under load and saves about 80 MB in all. Nothing is
// changed when GOGC is set in kubesim's environment. See "Memory" in
// README.md.
const (
	// steadyGCPercent is GOGC after start-up for the supervisor (with etcd
	// and kwok), the controller manager and the scheduler.
	steadyGCPercent = 50
	// apiServerSteadyGCPercent is GOGC after start-up for the API server,
	// whose live heap (about 100 MB, mostly OpenAPI models and the
	// managed-fields type converter) is the largest and changes least.
	apiServerSteadyGCPercent = 25
)

// steadyGCEnv names the GOGC a child switches to when the supervisor writes
// to its file descriptor 3 (see startChild).
const steadyGCEnv = "KUBESIM_STEADY_GOGC"

// gcEnv is the environment that asks a child to switch to GOGC percent after
// start-up, or nil when the user set GOGC.
func gcEnv(percent int) []string {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	return []string{steadyGCEnv + "=" + strconv.Itoa(percent)}
}

// steadyGC switches this process to GOGC percent and returns freed memory
// to the operating system at once.
func steadyGC(percent int) {
	debug.SetGCPercent(percent)
	debug.FreeOSMemory()
}

// awaitSteadyGC, in a child, waits in the background for the supervisor's
// "start-up is over" byte on file descriptor 3, then switches GOGC. If the
// supervisor goes away first, the read ends and nothing changes.
func awaitSteadyGC() {
	percent, err := strconv.Atoi(os.Getenv(steadyGCEnv))
	if err != nil || percent <= 0 {
		return
	}
	f := os.NewFile(3, "kubesim-started")
	go func() {
		defer f.Close()
		var b [1]byte
		if n, _ := f.Read(b[:]); n == 1 {
			steadyGC(percent)
		}
	}()
}
