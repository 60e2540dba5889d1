// Package kubesim starts and stops kubesim clusters: real local Kubernetes
// control planes (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) whose nodes and pods are simulated by kwok.
//
// The kubesim binary is built from the separate module in tools/kubesim;
// this package only runs it as a process, so it needs nothing but the
// standard library. The control plane's local runtime provider (through a
// Supervisor, which starts clusters on demand and notices one that exits) and
// the tests (through internal/kubesimtest) use it.
package kubesim
