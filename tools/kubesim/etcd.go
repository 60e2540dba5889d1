package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// etcdMain runs an embedded single-member etcd: TLS with client-certificate
// authentication for clients, plain HTTP on loopback for the (unused) peer
// port.
func etcdMain(args []string) error {
	fs := flag.NewFlagSet(partEtcd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("data-dir", "", "etcd data directory")
	clientPort := fs.Int("client-port", 2379, "client port on 127.0.0.1")
	peerPort := fs.Int("peer-port", 2380, "peer port on 127.0.0.1")
	cert := fs.String("cert", "", "serving certificate")
	key := fs.String("key", "", "serving key")
	ca := fs.String("ca", "", "CA for client certificates")
	if err := fs.Parse(args); err != nil {
		return err
	}

	cfg := embed.NewConfig()
	cfg.Name = "kubesim"
	cfg.Dir = *dir
	clientURL := url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", *clientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: *cert, KeyFile: *key, TrustedCAFile: *ca, ClientCertAuth: true}
	cfg.LogLevel = "warn"
	// A development cluster trades crash durability for speed: data still
	// survives a clean stop, and a process crash (not a machine crash).
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()

	ctx, stop := signalContext()
	defer stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return err
	case <-time.After(time.Minute):
		return fmt.Errorf("not ready after a minute")
	case <-ctx.Done():
		return nil
	}
	select {
	case err := <-e.Err():
		return err
	case <-ctx.Done():
		return nil
	}
}
