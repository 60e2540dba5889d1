//go:build !linux

package kubesim

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
