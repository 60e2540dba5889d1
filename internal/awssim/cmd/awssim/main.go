// Command awssim runs the local AWS stand-in (package internal/awssim) on its
// own, for demos: one endpoint for STS, IAM, EC2, EKS, RDS, S3 and Route53,
// with one account whose keys it prints.
//
// Once it serves, it prints one JSON line on stdout:
//
//	{"ready":true,"url":"http://127.0.0.1:4566","region":"us-east-1",
//	 "account":{"id":"...","access_key_id":"...","secret_access_key":"...","arn":"..."}}
//
// The call log is at <url>/_awssim/calls and the live resources at
// <url>/_awssim/resources. It stops on SIGINT or SIGTERM, stopping every
// kubesim it started.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "awssim:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, printing the ready line to stdout.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("awssim", flag.ContinueOnError)
	var cfg awssim.Config
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:4566", "listen address")
	fs.StringVar(&cfg.Region, "region", "us-east-1", "region for calls that name none (Route53)")
	fs.BoolVar(&cfg.Kubesim, "kubesim", true, "make every EKS cluster a kubesim cluster")
	fs.StringVar(&cfg.KubesimBinary, "kubesim-bin", "", "kubesim binary (default: $QLEET_KUBESIM_BIN, <repo>/bin/kubesim, or PATH)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for the kubesim clusters' state (default: a temporary one)")
	fs.DurationVar(&cfg.ClusterDelay, "cluster-delay", 5*time.Second, "how long an EKS cluster stays CREATING at least")
	fs.DurationVar(&cfg.NodegroupDelay, "nodegroup-delay", 2*time.Second, "how long an EKS node group stays CREATING or UPDATING")
	fs.DurationVar(&cfg.DBDelay, "db-delay", 3*time.Second, "how long an RDS instance stays creating")
	fs.DurationVar(&cfg.DeleteDelay, "delete-delay", 2*time.Second, "how long clusters, node groups and DB instances stay deleting")
	account := fs.String("account", "000000000000", "12-digit ID of the account to create")
	keyID := fs.String("access-key-id", "AKIAAWSSIMDEMO000000", "the account's access key ID (empty: generated)")
	secret := fs.String("secret-access-key", "awssim-demo-secret-access-key", "the account's secret access key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Kubesim && cfg.KubesimBinary == "" {
		if bin := os.Getenv("QLEET_KUBESIM_BIN"); bin != "" {
			cfg.KubesimBinary = bin
		}
	}

	sim := awssim.New(cfg)
	if err := sim.Start(ctx); err != nil {
		return err
	}
	var acct awssim.Account
	var err error
	if *keyID == "" {
		acct, err = sim.AddAccount(*account)
	} else {
		acct, err = sim.AddAccountWithKey(*account, *keyID, *secret)
	}
	if err != nil {
		return errors.Join(err, sim.Stop(context.Background()))
	}
	if err := json.NewEncoder(stdout).Encode(map[string]any{"ready": true, "url": sim.URL(), "region": cfg.Region, "account": acct}); err != nil {
		return errors.Join(err, sim.Stop(context.Background()))
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return sim.Stop(stopCtx)
}
