package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The test binary doubles as the kubesim binary: started with this variable
// set, it runs kubesim's main instead of the tests. Parts re-execute it the
// same way, so the tests run the real process tree without a second build.
const asKubesimEnv = "KUBESIM_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asKubesimEnv) == "1" {
		os.Exit(kubesimMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// proc is a kubesim process started by a test.
type proc struct {
	cmd    *exec.Cmd
	ready  readyLine
	stderr *tailBuffer
	done   chan struct{}
}

// kubesimCommand returns a command that runs this binary as kubesim.
func kubesimCommand(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), asKubesimEnv+"=1")
	return cmd
}

// startKubesim runs `kubesim run --data-dir dir args...` and waits for the
// ready line. The process is stopped when the test ends.
func startKubesim(t testing.TB, dir string, args ...string) *proc {
	t.Helper()
	p := &proc{stderr: newTailBuffer(60), done: make(chan struct{})}
	p.cmd = kubesimCommand(append([]string{"run", "--data-dir", dir}, args...)...)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })

	select {
	case line, ok := <-lines:
		if !ok {
			<-p.done
			t.Fatalf("kubesim exited before ready: %s", p.stderrTail())
		}
		if err := json.Unmarshal([]byte(line), &p.ready); err != nil || !p.ready.Ready {
			t.Fatalf("ready line %q: %v", line, err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("kubesim not ready in 3m: %s", p.stderrTail())
	}
	go func() {
		for line := range lines {
			t.Errorf("unexpected second stdout line: %q", line)
		}
	}()
	return p
}

// stop sends SIGTERM and waits; it fails the test if kubesim takes more
// than a minute or exits non-zero.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("kubesim did not stop within a minute after SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("kubesim exit code %d after SIGTERM: %s", code, p.stderrTail())
	}
}

func (p *proc) stderrTail() string {
	p.stderr.mu.Lock()
	defer p.stderr.mu.Unlock()
	return strings.Join(p.stderr.lines, "\n")
}

func (p *proc) client(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", p.ready.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// descendants lists every process below pid, from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// eventually polls cond every 200ms until it returns true or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not true within %s (last error: %v)", what, d, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// runKubesim runs kubesim to completion and returns its exit code and
// stderr.
func runKubesim(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	cmd := kubesimCommand(args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("kubesim %v did not exit within %s: %s", args, timeout, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}
