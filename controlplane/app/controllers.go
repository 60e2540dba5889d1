package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/cloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/cluster"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/dataservice"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/gateway"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/support"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/workload"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// starter is a controller of any kind.
type starter interface {
	Start(ctx context.Context) error
}

// startControllers runs one controller per kind against the API at endpoint.
func (a *App) startControllers(ctx context.Context, endpoint, token string) error {
	opts := []client.Option{client.WithToken(token), client.WithUserAgent("qleet-controller")}
	if ca := a.CACertPath; ca != "" {
		pemData, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("api ca cert: %w", err)
		}
		opts = append(opts, client.WithCACert(pemData))
	}
	cl, err := client.New(endpoint, opts...)
	if err != nil {
		return err
	}
	metrics := reconcile.NewMetrics(a.Registry)
	a.reconcileMetrics = metrics
	cfg := a.controllerConfig()
	cfg.Metrics = metrics
	// Every controller's reconciles share one set of lookups: reads of the same runtime or definition
	// made at once are shared across kinds.
	cfg.Lookups = reconcile.NewLookups(cl)
	if a.cfg.LockTTL > 0 {
		cfg.LockTTL = a.cfg.LockTTL
	}

	localDir := ""
	if a.cfg.API { // all-in-one: this process owns local clusters
		localDir = filepath.Join(a.cfg.DataDir, "runtimes")
	}
	accounts := &awscloud.Accounts{Client: cl}
	eksRuntimes := &cluster.EKS{Accounts: accounts, Poll: a.cfg.AWSPoll}
	agents := newAgents(ctx, cl, a.Broker, a.log)
	owned := &ownedChanges{ctx: ctx, queue: a.Broker, log: a.log, window: 20 * time.Millisecond, pending: map[string]bool{}}
	conn := kube.NewConnector(kube.ConnectorConfig{LocalDir: localDir, Sources: map[string]kube.RESTConfigSource{api.ProviderEKS: eksRuntimes.RESTConfig},
		OnReachability: func(id string, err error) { cluster.ReportReachability(ctx, cl.KubernetesRuntimes(), id, err) },
		OnOwnedChange:  owned.changed, OnCluster: agents.clusterOpened})
	a.conn = conn
	a.closers = append(a.closers, func(context.Context) { conn.Close() })
	var local *kubesim.Supervisor
	if localDir != "" {
		local = kubesim.NewSupervisor(kubesim.SupervisorConfig{Dir: localDir, Binary: a.cfg.KubesimBinary, Logger: a.log,
			OnExit: func(id string, err error) { cluster.ReportExit(ctx, cl.KubernetesRuntimes(), conn, id, err) }})
		a.closers = append(a.closers, local.StopAll)
	}

	ctrls := []starter{
		reconcile.New(a.Broker, cl.CloudAccounts(), &cloud.AccountReconciler{Accounts: accounts}, cfg),
		reconcile.New(a.Broker, cl.KubernetesRuntimes(), &cluster.Reconciler{Connector: conn, Local: local, EKS: eksRuntimes, Client: cl,
			RecheckInterval: a.cfg.RuntimeRecheck, ScaleDownDelay: a.cfg.ScaleDownDelay, OwnerGrace: a.cfg.OwnerGrace}, cfg),
		reconcile.New(a.Broker, cl.RuntimeProfiles(), &cluster.ProfileReconciler{Client: cl}, cfg),
	}
	ctrls = append(ctrls, a.workloadControllers(cl, conn, cfg, &dataservice.AWS{Accounts: accounts})...)
	ctrls = append(ctrls,
		reconcile.New(a.Broker, cl.SupportServices(), &support.Reconciler{Client: cl, Connector: conn, ChartDir: a.cfg.SupportChartDir,
			ChartMirror: a.cfg.SupportChartMirror, OwnerGrace: a.cfg.OwnerGrace}, cfg),
		reconcile.New(a.Broker, cl.Gateways(), &gateway.Reconciler{Client: cl, Connector: conn}, cfg),
		reconcile.New(a.Broker, cl.DomainNames(), &gateway.DomainReconciler{Client: cl, Accounts: accounts}, cfg),
	)
	ctrls = append(ctrls, agents, presence{b: a.Broker, activity: cfg.Activity})
	for _, c := range ctrls {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.runStarter(cctx, c)
		}()
		a.ctrlStop = append(a.ctrlStop, func() { cancel(); <-done })
	}
	return nil
}

// runStarter runs c until ctx ends. A start that the broker did not answer (JetStream electing a leader,
// or a NATS server of the cluster restarting: make chaos restarted a controller into one) is tried
// again after a pause (retryWhile), rather than ending the process; any other error does.
func (a *App) runStarter(ctx context.Context, c starter) {
	err := a.retryWhile(ctx, "start a controller", broker.Unanswered, 0, func() error { return c.Start(ctx) })
	if err != nil && ctx.Err() == nil {
		a.fail(fmt.Errorf("controller: %w", err))
	}
}

// workloadControllers returns the workload_definition and workload_instance controllers.
func (a *App) workloadControllers(cl *client.Client, conn *kube.Connector, cfg reconcile.Config, dataAWS *dataservice.AWS) []starter {
	renderer := &render.Renderer{ChartDir: a.cfg.ChartDir}
	return []starter{
		reconcile.New(a.Broker, cl.WorkloadDefinitions(), &workload.DefinitionReconciler{Client: cl, Renderer: renderer}, cfg),
		reconcile.New(a.Broker, cl.Secrets(), &workload.SecretReconciler{Client: cl}, cfg),
		reconcile.New(a.Broker, cl.Databases(), &dataservice.Reconciler[api.DatabaseSpec, api.DatabaseStatus]{Client: cl, Connector: conn, Kind: dataservice.Databases, AWS: dataAWS}, dataConfig(cfg)),
		reconcile.New(a.Broker, cl.Buckets(), &dataservice.Reconciler[api.BucketSpec, api.BucketStatus]{Client: cl, Connector: conn, Kind: dataservice.Buckets, AWS: dataAWS}, dataConfig(cfg)),
		a.instanceController(cl, conn, renderer, cfg),
	}
}

// instanceController returns the workload_instance controller: the real one, or with
// Config.SimulateCompute the no-op one of the benchmark's simulation.
func (a *App) instanceController(cl *client.Client, conn *kube.Connector, renderer *render.Renderer, cfg reconcile.Config) starter {
	if a.cfg.SimulateCompute {
		return reconcile.New(a.Broker, cl.WorkloadInstances(), &workload.NoopInstanceReconciler{Client: cl, Renderer: renderer}, cfg)
	}
	return reconcile.New(a.Broker, cl.WorkloadInstances(), &workload.InstanceReconciler{Client: cl, Connector: conn, Renderer: renderer, ProgressDeadline: a.cfg.ProgressDeadline, CleanupGrace: a.cfg.CleanupGrace}, instanceConfig(cfg))
}

// instanceConfig gives the workload_instance controller four times the workers of the others: its
// reconciles mostly wait on clusters (an apply to a busy API server takes about a second), and a
// reconcile whose cluster already has its most applies in flight (kube.Cluster.ApplyConcurrency) lets
// its worker go at once (kube.TryApply), so that one slow cluster never holds more workers than that,
// and the reconciles that only read health from the cache keep their turn (make bench, churn).
func instanceConfig(cfg reconcile.Config) reconcile.Config {
	cfg.Workers *= 4
	// A placed instance that no runtime or profile serves yet waits on their writes (placement).
	cfg.WakeOn = []string{api.KindKubernetesRuntime, api.KindRuntimeProfile}
	return cfg
}

// dataConfig lets a data service that waits for a runtime in its home region (none Ready there yet)
// wake on the writes of runtimes and profiles: a runtime created there, or a profile's runtime becoming
// Ready (dataservice's NoRuntimeInHomeRegion).
func dataConfig(cfg reconcile.Config) reconcile.Config {
	cfg.WakeOn = []string{api.KindKubernetesRuntime, api.KindRuntimeProfile}
	return cfg
}

// presence announces this process's controllers to their peer replicas (broker.Presence). A peer that
// leaves, stopped or dead, may have held requeues in its memory: the controllers then pass over their
// objects that are not reconciled (reconcile.Activity).
type presence struct {
	b        *broker.Broker
	activity *reconcile.Activity
}

// Start holds this process's presence until ctx ends.
func (p presence) Start(ctx context.Context) error {
	return p.b.Presence(ctx, broker.PresenceConfig{Left: func(string) { p.activity.Lost() }})
}
