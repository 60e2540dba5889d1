package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"
)

// proc is one part of the topology run as a process in its own process group, so that a kill takes its
// children too (PostgreSQL's backends). It can be killed with SIGKILL and started again with the same
// arguments.
type proc struct {
	part string // "api", "controller", "nats" or "postgres"
	name string
	// server is a NATS server's name in its cluster (nats-server -n), as JetStream names leaders.
	server string
	argv   []string
	env    []string
	dir    string
	log    string
	cred   *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// kills records when each of this part's processes was killed, by pid.
	kills map[int]time.Time
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	return nil
}

// kill sends SIGKILL to the process group and waits until the process is gone. It returns the pid.
func (p *proc) kill() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-p.done
	if p.kills == nil {
		p.kills = map[int]time.Time{}
	}
	p.kills[pid] = time.Now()
	return pid
}

// stop ends the process group gracefully (SIGTERM, then SIGKILL after 10s).
func (p *proc) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// poll calls cond every 100ms until it returns nil or ctx ends, and returns cond's last error then.
func poll(ctx context.Context, what string, cond func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := cond(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %w)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func dialable(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

func httpOK(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

// postgres is a throwaway PostgreSQL server that survives kill -9 and restarts on the same data dir
// (crash recovery), the way internal/pgtest starts one, but as a proc the chaos run can kill.
type postgres struct {
	*proc
	port int
	url  string // of database qleet
}

// newPostgres initialises and starts a server in a new directory under the system temp dir (the postgres
// user must be able to reach it, which a test's temp dir does not allow); close removes it.
func newPostgres(ctx context.Context, logPath string) (*postgres, error) {
	dir, err := os.MkdirTemp("", "qleet-chaos-pg-")
	if err != nil {
		return nil, err
	}
	p, err := initPostgres(ctx, dir, logPath)
	if err != nil {
		_ = os.RemoveAll(dir)
	}
	return p, err
}

func initPostgres(ctx context.Context, dir, logPath string) (*postgres, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(bins, func(i, j int) bool { return version(bins[i]) > version(bins[j]) })
	initdb, server := "initdb", "postgres"
	if len(bins) > 0 {
		initdb, server = filepath.Join(bins[0], "initdb"), filepath.Join(bins[0], "postgres")
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 { // PostgreSQL refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.CommandContext(ctx, initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.Dir, cmd.Env = dir, []string{"HOME=" + dir, "LC_ALL=C", "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &postgres{port: port, proc: &proc{
		part: "postgres", name: "postgres", dir: dir, log: logPath, cred: cred,
		env: []string{"HOME=" + dir, "LC_ALL=C"},
		argv: []string{server, "-D", data, "-p", strconv.Itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=300", "-c", "shared_buffers=64MB"},
	}}
	if err := p.startReady(ctx); err != nil {
		return nil, err
	}
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(admin)))
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE qleet"); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	p.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/qleet?sslmode=disable", port)
	return p, nil
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// startReady starts the server and waits until it answers queries (after crash recovery, on a restart).
// Right after a kill the old backends may still hold the shared memory, and the new server exits at
// once; it is started again then, up to 20 times.
func (p *postgres) startReady(ctx context.Context) error {
	var err error
	for range 20 {
		if err = p.startOnce(ctx); err == nil || !errors.Is(err, errExited) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

var errExited = errors.New("postgres exited")

func (p *postgres) startOnce(ctx context.Context) error {
	if err := p.start(); err != nil {
		return err
	}
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn), pgdriver.WithDialTimeout(time.Second)))
	defer db.Close()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := poll(wctx, "postgres ready", func(ctx context.Context) error {
		if !p.running() {
			return fmt.Errorf("%w: %s", errExited, tail(logTail(p.log), 2000))
		}
		return db.PingContext(ctx)
	})
	if errors.Is(err, errExited) || !p.running() {
		return fmt.Errorf("%w: %w", errExited, err)
	}
	return err
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// balancer is a TCP load balancer in front of the API replicas, as a deployment has: each connection
// goes to the next replica that accepts it.
type balancer struct {
	l        net.Listener
	backends []string
	mu       sync.Mutex
	next     int
}

func newBalancer(backends []string) (*balancer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &balancer{l: l, backends: backends}
	go b.serve()
	return b, nil
}

func (b *balancer) URL() string { return "http://" + b.l.Addr().String() }

func (b *balancer) Close() { _ = b.l.Close() }

func (b *balancer) serve() {
	for {
		c, err := b.l.Accept()
		if err != nil {
			return
		}
		go b.proxy(c)
	}
}

func (b *balancer) proxy(c net.Conn) {
	defer c.Close()
	b.mu.Lock()
	first := b.next
	b.next++
	b.mu.Unlock()
	var up net.Conn
	for i := range b.backends {
		addr := b.backends[(first+i)%len(b.backends)]
		var err error
		if up, err = net.DialTimeout("tcp", addr, 500*time.Millisecond); err == nil {
			break
		}
	}
	if up == nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}
