package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	opts := &server.Options{
		ServerName: "qleet",
		Host:       e.cfg.Host,
		Port:       e.port,
		JetStream:  true,
		StoreDir:   e.cfg.DataDir,
		NoSigs:     true,
		NoLog:      true,
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

// ClientURL is the nats:// URL clients connect to. It is stable across Stop and Start once the server
// has started once.
func (e *EmbeddedServer) ClientURL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprintf("nats://%s", net.JoinHostPort(e.cfg.Host, fmt.Sprint(e.port)))
}
