package main

import (
	"fmt"
	"strconv"
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

func (l layout) etcdArgs() []string {
	return []string{
		"--data-dir=" + l.dir.path("etcd"),
		"--client-port=" + strconv.Itoa(l.state.EtcdClientPort),
		"--peer-port=" + strconv.Itoa(l.state.EtcdPeerPort),
		"--cert=" + l.pki.cert("etcd-server"),
		"--key=" + l.pki.key("etcd-server"),
		"--ca=" + l.pki.cert("ca"),
	}
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
	}
}

// controllerManagerArgs: no serving port (health is seen through the API),
// no leader election (one replica), per-controller service accounts as
// kubeadm does, and a client rate high enough for large rollouts.
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
	}
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
