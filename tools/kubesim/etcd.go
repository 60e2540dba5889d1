package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdSnapshotCount is how many applied entries etcd keeps in its in-memory
// raft log before it snapshots and compacts it. etcd's default (100 000)
// lets a busy cluster hold tens of MB of log entries; a single member needs
// none of them for followers.
const etcdSnapshotCount = 10000

// etcdConfig is the embedded single-member etcd: TLS with client-certificate
// authentication for clients, plain HTTP on loopback for the (unused) peer
// port, logging to logPath.
func (l layout) etcdConfig(logPath string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = "kubesim"
	cfg.Dir = l.dir.path("etcd")
	clientURL := url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", l.state.EtcdClientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", l.state.EtcdPeerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo = transport.TLSInfo{
		CertFile:       l.pki.cert("etcd-server"),
		KeyFile:        l.pki.key("etcd-server"),
		TrustedCAFile:  l.pki.cert("ca"),
		ClientCertAuth: true,
	}
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{logPath}
	cfg.ZapLoggerBuilder = etcdLogger(logPath)
	cfg.SnapshotCount = etcdSnapshotCount
	// A development cluster trades crash durability for speed: data still
	// survives a clean stop, and a crash of the process (not of the machine).
	cfg.UnsafeNoFsync = true
	return cfg
}

// runEtcd runs etcd inside the supervisor until ctx ends or etcd fails.
// etcd logs to the file named in cfg.LogOutputs itself, so w is unused.
func runEtcd(cfg *embed.Config) func(ctx context.Context, w io.Writer) error {
	return func(ctx context.Context, _ io.Writer) error {
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			return err
		}
		// Close stops serving, waits for in-flight requests and closes the
		// data files; it runs whether etcd stopped by itself or was asked to.
		defer e.Close()
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			return err
		case <-e.Server.StopNotify():
			return errors.New("server stopped during start-up")
		case <-ctx.Done():
			return nil
		}
		select {
		case err := <-e.Err():
			return err
		case <-e.Server.StopNotify():
			return errors.New("server stopped")
		case <-ctx.Done():
			return nil
		}
	}
}

// etcdLogger is etcd's own zap configuration, logging to logPath, except
// that a fatal entry panics with a partFailure instead of exiting the
// process: etcd runs inside the supervisor, which must stop the other parts
// and name the cause. The panic is recovered by startInProcess when it
// happens in etcd's start-up, which is where etcd logs fatal errors.
func etcdLogger(logPath string) func(*embed.Config) error {
	return func(cfg *embed.Config) error {
		zc := logutil.DefaultZapLoggerConfig
		zc.OutputPaths, zc.ErrorOutputPaths = []string{logPath}, []string{logPath}
		zc.Level = zap.NewAtomicLevelAt(logutil.ConvertToZapLevel(cfg.LogLevel))
		lg, err := zc.Build(zap.WithFatalHook(etcdFatal{}))
		if err != nil {
			return err
		}
		return embed.NewZapLoggerBuilder(lg)(cfg)
	}
}

// etcdFatal panics with the entry's message and error.
type etcdFatal struct{}

// OnWrite implements zapcore.CheckWriteHook.
func (etcdFatal) OnWrite(ce *zapcore.CheckedEntry, fields []zapcore.Field) {
	msg := ce.Message
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Key == "error" {
			msg += ": " + err.Error()
		}
	}
	panic(partFailure(msg))
}
