package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanagerapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// Part names: each is also the hidden subcommand that runs it.
const (
	partEtcd              = "etcd"
	partAPIServer         = "kube-apiserver"
	partControllerManager = "kube-controller-manager"
	partScheduler         = "kube-scheduler"
	partKwok              = "kwok"
)

// partMains are the hidden subcommands. Each runs one upstream Kubernetes
// component in its own process, so that their process-global state (flags,
// klog, Prometheus registries, signal handlers, feature gates) never
// collides. etcd and kwok keep no such state and run inside the supervisor.
var partMains = map[string]func(args []string) error{
	partAPIServer:         func(args []string) error { return runCobra(apiserverapp.NewAPIServerCommand(), args) },
	partControllerManager: func(args []string) error { return runCobra(controllermanagerapp.NewControllerManagerCommand(), args) },
	partScheduler:         func(args []string) error { return runCobra(schedulerapp.NewSchedulerCommand(), args) },
}

// runPart is the entry point of a child process.
func runPart(part string, args []string) int {
	if want := os.Getenv(parentPIDEnv); want != "" {
		if strconv.Itoa(os.Getppid()) != want {
			fmt.Fprintln(os.Stderr, childErrorPrefix+"supervisor is gone")
			return 1
		}
	}
	awaitSteadyGC()
	if err := partMains[part](args); err != nil {
		fmt.Fprintln(os.Stderr, childErrorPrefix+oneLine(err.Error()))
		return 1
	}
	return 0
}

// runCobra runs an upstream component command with the given arguments.
func runCobra(cmd *cobra.Command, args []string) error {
	cmd.SetArgs(args)
	return cli.RunNoErrOutput(cmd)
}

// signalContext is cancelled by SIGTERM or SIGINT.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

var errInterrupted = errors.New("interrupted")
