package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures an in-process nats-server with JetStream.
type EmbeddedConfig struct {
	// DataDir is where JetStream stores streams and KV buckets. Required.
	DataDir string
	// Host is the listen address. Default "127.0.0.1".
	Host string
	// Port is the client port. Default (0 or -1): a random free port, chosen on the first Start and kept
	// for every later Start so that clients reconnect to the same URL.
	Port int
	// ReadyTimeout bounds how long Start waits for the server to accept connections. Default 10s.
	ReadyTimeout time.Duration
	// ServerName names the server; servers of one cluster need distinct names. Default "qleet".
	ServerName string
	// Cluster, when set, makes the server one node of a NATS cluster with clustered JetStream (so that
	// streams and buckets can be replicated). Default nil: a standalone server.
	Cluster *EmbeddedCluster
}

// EmbeddedCluster is the cluster side of an embedded server: where it listens for routes from the other
// nodes, and where it finds them.
type EmbeddedCluster struct {
	// Name of the cluster, the same on every node. Required.
	Name string
	// Port is the route listen port on Host. Required: the other nodes' Routes name it.
	Port int
	// Routes are the other nodes' route URLs, nats-route://host:port (listing this node too is harmless).
	Routes []string
}

// EmbeddedServer is a nats-server running in this process. It is separate from any client connection so
// that it can be stopped and started again on the same port and data dir (for fault tests, and for
// restarting the broker under a running control plane).
type EmbeddedServer struct {
	cfg EmbeddedConfig

	mu   sync.Mutex
	srv  *server.Server
	port int
}

// NewEmbeddedServer validates cfg and applies its defaults. It does not start the server.
func NewEmbeddedServer(cfg EmbeddedConfig) (*EmbeddedServer, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("embedded nats: DataDir is required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = server.RANDOM_PORT
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "qleet"
	}
	if c := cfg.Cluster; c != nil && (c.Name == "" || c.Port <= 0) {
		return nil, errors.New("embedded nats: a cluster needs a name and a route port")
	}
	return &EmbeddedServer{cfg: cfg, port: cfg.Port}, nil
}

// Start starts the server and waits until it accepts client connections. Starting a running server is a
// no-op. ctx bounds the wait together with ReadyTimeout.
func (e *EmbeddedServer) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		return nil
	}
	// JetStream would make the store dir 0750; it is private like the rest of the data dir.
	if err := os.MkdirAll(e.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	if err := os.Chmod(e.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	opts := &server.Options{
		ServerName: e.cfg.ServerName,
		Host:       e.cfg.Host,
		Port:       e.port,
		JetStream:  true,
		StoreDir:   e.cfg.DataDir,
		NoSigs:     true,
		NoLog:      true,
	}
	if c := e.cfg.Cluster; c != nil {
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: e.cfg.Host, Port: c.Port}
		opts.Routes = server.RoutesFromStr(strings.Join(c.Routes, ","))
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("embedded nats: new server: %w", err)
	}
	srv.Start()

	deadline := e.cfg.ReadyTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < deadline {
		deadline = time.Until(d)
	}
	if !srv.ReadyForConnections(deadline) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("embedded nats: not ready for connections after %s", deadline)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return errors.New("embedded nats: JetStream failed to start")
	}
	if addr, ok := srv.Addr().(*net.TCPAddr); ok {
		// Keep the port chosen at random so that a restart listens where clients reconnect.
		e.port = addr.Port
	}
	e.srv = srv
	return nil
}

// Stop shuts the server down and waits until it has stopped. Stopping a stopped server is a no-op.
func (e *EmbeddedServer) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv == nil {
		return
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.srv = nil
}

// Running reports whether the server is started.
func (e *EmbeddedServer) Running() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv != nil
}

// Routes reports, for a cluster node, how many other nodes it has routes to and over how many
// connections (route pooling opens several per node); 0, 0 when stopped.
func (e *EmbeddedServer) Routes() (remotes, conns int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv == nil {
		return 0, 0
	}
	return e.srv.NumRemotes(), e.srv.NumRoutes()
}

// ClientURL is the nats:// URL clients connect to. It is stable across Stop and Start once the server
// has started once.
func (e *EmbeddedServer) ClientURL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprintf("nats://%s", net.JoinHostPort(e.cfg.Host, fmt.Sprint(e.port)))
}
