// Package pgtest gives tests a fresh, empty PostgreSQL database.
//
// With $QLEET_TEST_DATABASE_URL set (a URL whose user may CREATE DATABASE), each call creates a database on
// that server. Otherwise the first call starts one throwaway PostgreSQL server for the whole test process,
// from the Debian binaries in /usr/lib/postgresql/*/bin or from PATH, in a temporary directory, listening
// on 127.0.0.1 at a free port, with fsync off. Every call then creates its own database, dropped when the
// test ends.
//
// The server stops when pgtest.Main's m.Run returns, or, without Main, when the last test using it has
// finished. As a safety net it also receives SIGQUIT if the test process dies.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"
)

// EnvURL names the environment variable with an external server's URL.
const EnvURL = "QLEET_TEST_DATABASE_URL"

const installHint = "install PostgreSQL server binaries with `apt-get install -y postgresql` (or set " + EnvURL + ")"

var (
	mu      sync.Mutex
	srv     *server // the local server, or nil
	srvErr  error   // why it could not start; sticky for the process
	admin   *sql.DB // connection to the maintenance database of the server in use
	baseURL *url.URL
	users   int  // tests whose databases are still alive
	inMain  bool // Main owns the server's lifetime
)

// Main runs the tests and then stops the PostgreSQL server, if one was started. Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	stopLocked()
	mu.Unlock()
	os.Exit(code)
}

// URL creates a fresh database and returns its URL ("postgres://...?sslmode=disable"). The database is
// dropped when t ends (after any cleanup registered later, such as closing a store). Missing PostgreSQL
// binaries fail the test; they never skip it.
func URL(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if err := ensureLocked(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := "test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	users++
	adminDB := admin
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adminDB.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
		mu.Lock()
		defer mu.Unlock()
		users--
		if users == 0 && !inMain {
			stopLocked()
		}
	})
	u := *baseURL
	u.Path = "/" + name
	return u.String()
}

// ensureLocked connects to $QLEET_TEST_DATABASE_URL or starts the local server, once.
func ensureLocked() error {
	if admin != nil {
		return nil
	}
	if srvErr != nil {
		return srvErr
	}
	if raw := os.Getenv(EnvURL); raw != "" {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("parse $%s: %w", EnvURL, err)
		}
		db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(raw)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := db.PingContext(ctx); err != nil {
			_ = db.Close()
			return fmt.Errorf("connect to $%s: %w", EnvURL, err)
		}
		admin, baseURL = db, u
		return nil
	}
	s, err := startServer()
	if err != nil {
		srvErr = err
		return err
	}
	u := s.adminURL()
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(u.String())))
	db.SetMaxOpenConns(4)
	srv, admin, baseURL = s, db, u
	return nil
}

// stopLocked closes the admin connection and stops the local server, if any.
func stopLocked() {
	if admin != nil {
		_ = admin.Close()
		admin = nil
	}
	if srv != nil {
		srv.stop()
		srv = nil
	}
}

type server struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{} // closed when the postgres process has exited
}

// findBinaries returns the directory holding initdb and postgres: the newest /usr/lib/postgresql/N/bin,
// else PATH.
func findBinaries() (initdb, postgres string, err error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "postgres")
		if isExecutable(i) && isExecutable(p) {
			return i, p, nil
		}
	}
	i, err1 := exec.LookPath("initdb")
	p, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return i, p, nil
	}
	return "", "", fmt.Errorf("PostgreSQL binaries initdb and postgres not found in /usr/lib/postgresql/*/bin or PATH; %s", installHint)
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// serverUser returns the credential to run PostgreSQL with: nil for a non-root process, else the
// "postgres" account (PostgreSQL refuses to run as root).
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses to: no \"postgres\" user to run it as (%w); %s", err, installHint)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// adminURL is the URL of the server's postgres database as the superuser.
func (s *server) adminURL() *url.URL {
	return &url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
}

func startServer() (*server, error) {
	initdb, postgres, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "qleet-pgtest-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("chown %s to postgres: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "postgres.log")

	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync")
	cmd.Dir = dir
	cmd.Env = serverEnv(dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}

	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close()
	cmd = exec.Command(postgres, "-D", data,
		"-p", strconv.Itoa(port),
		"-k", dir, // unix socket in the temp dir, not /var/run/postgresql
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=64MB",
	)
	cmd.Dir = dir
	cmd.Env = serverEnv(dir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig: if the test binary dies without cleaning up, the server shuts down immediately.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &server{dir: dir, port: port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()

	if err := s.waitReady(30 * time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func serverEnv(dir string) []string {
	env := []string{"HOME=" + dir, "LC_ALL=C", "TZ=UTC"}
	if p := os.Getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	}
	return env
}

// waitReady polls until the server accepts connections, the process exits, or the deadline passes.
func (s *server) waitReady(timeout time.Duration) error {
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn), pgdriver.WithDialTimeout(time.Second)))
	defer db.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited during startup:\n%s", s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %s: %w\n%s", timeout, err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop asks for a fast shutdown (SIGINT), escalates to an immediate one (SIGQUIT), and removes the data.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	_ = os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// StartServer starts a throwaway PostgreSQL server for use outside tests (benchmarks, demos), with the same
// settings as the test server, and returns the URL of a fresh empty database on it and a function that
// stops the server and removes its data. It does not consult $QLEET_TEST_DATABASE_URL and does not share
// the server that URL starts.
func StartServer(ctx context.Context) (dbURL string, stop func(), err error) {
	s, err := startServer()
	if err != nil {
		return "", nil, err
	}
	u := s.adminURL()
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(u.String())))
	defer db.Close()
	name := "bench_" + randomHex(8)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		s.stop()
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	return u.String(), s.stop, nil
}
