package kubesim

import "syscall"

// sysProcAttr makes kubesim receive SIGTERM if its parent dies, so that a
// crashed control plane or test process leaves no cluster behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
