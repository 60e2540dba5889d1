package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// childErrorPrefix marks the line a child writes when its part fails, so the
// supervisor can name the cause without guessing from log lines.
const childErrorPrefix = "kubesim-child-error: "

// parentPIDEnv carries the supervisor's PID to a child, which exits at once
// if its parent is already gone (closing the race with Pdeathsig).
const parentPIDEnv = "KUBESIM_PARENT_PID"

// child is one running part of the cluster: either a re-executed kubesim
// (cmd is set) or a goroutine of the supervisor itself (cancel is set).
type child struct {
	part    string
	cmd     *exec.Cmd          // a child process; nil for an in-process part
	cancel  context.CancelFunc // stops an in-process part; nil for a process
	started *os.File           // write end of the child's fd 3; see startedUp
	log     *os.File
	tail    *tailBuffer
	done    chan struct{}
	err     error // valid once done is closed
}

// startChild runs `kubesim <part> args...` with its output in logPath.
// The child dies with the supervisor (Pdeathsig) and lives in its own process
// group, so a terminal's Ctrl-C reaches only the supervisor, which then stops
// the parts in order.
func startChild(part, logPath string, args, env []string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%s: find own executable: %w", part, err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", part, err)
	}
	c := &child{part: part, log: logFile, tail: newTailBuffer(40), done: make(chan struct{})}
	c.cmd = exec.Command(exe, append([]string{part}, args...)...)
	c.cmd.Env = append(append(os.Environ(), parentPIDEnv+"="+strconv.Itoa(os.Getpid())), env...)
	out := io.MultiWriter(logFile, c.tail)
	c.cmd.Stdout, c.cmd.Stderr = out, out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// fd 3 of the child: the supervisor writes one byte when the cluster is
	// ready (see awaitSteadyGC).
	startedR, startedW, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: pipe: %w", part, err)
	}
	c.started = startedW
	c.cmd.ExtraFiles = []*os.File{startedR}
	err = c.cmd.Start()
	startedR.Close()
	if err != nil {
		logFile.Close()
		startedW.Close()
		return nil, fmt.Errorf("%s: start: %w", part, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		logFile.Close()
		startedW.Close()
		close(c.done)
	}()
	return c, nil
}

// startedUp tells a child process that the cluster has started, so that it
// switches to its steady-state GC setting. Closing without writing (when the
// child ends) tells it nothing.
func (c *child) startedUp() {
	if c.started != nil {
		_, _ = c.started.Write([]byte{1})
	}
}

// partFailure is the panic value with which an in-process part reports a
// fatal error that its library would otherwise exit the process for.
type partFailure string

func (f partFailure) Error() string { return string(f) }

// startInProcess runs a part as a goroutine of the supervisor, with its
// output in logPath (truncated). The part must return when ctx ends; an
// error it returns, or a panic in run itself, is the part's cause.
func startInProcess(part, logPath string, run func(ctx context.Context, log io.Writer) error) (*child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", part, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &child{part: part, cancel: cancel, log: logFile, tail: newTailBuffer(40), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				if f, ok := r.(partFailure); ok {
					c.err = f
				} else {
					c.err = fmt.Errorf("panic: %v", r)
				}
			}
		}()
		c.err = run(ctx, io.MultiWriter(logFile, c.tail))
	}()
	return c, nil
}

// pid is the child's process ID, or 0 for an in-process part.
func (c *child) pid() int {
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// cause is a one-line reason for the child's failure, taken from its output.
func (c *child) cause() string {
	if c.cmd == nil {
		// An in-process part returns its cause as an error.
		if c.err != nil {
			return oneLine(c.err.Error())
		}
		return "stopped without an error"
	}
	line := c.tail.cause()
	if line == "" && c.err != nil {
		return c.err.Error()
	}
	if line == "" {
		return "exited with status 0"
	}
	return line
}

// stop sends SIGTERM to the child's process group and waits; after grace it
// sends SIGKILL. It returns once the child has been reaped. An in-process
// part is cancelled and waited for, at most grace; its log is closed after.
func (c *child) stop(grace time.Duration) {
	if c.cmd == nil {
		c.cancel()
		select {
		case <-c.done:
			_ = c.log.Close()
		case <-time.After(grace):
		}
		return
	}
	if c.exited() {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
	// Anything left in the group (there should be nothing) goes too.
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
}

// waitReady polls check until it succeeds, the child exits, or ctx ends.
func (c *child) waitReady(ctx context.Context, check func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s: exited during start-up: %s", c.part, c.cause())
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s: not ready in time: %v", c.part, last)
			}
			return fmt.Errorf("%s: start-up interrupted", c.part)
		case <-tick.C:
		}
	}
}

// tailBuffer keeps the last lines written to it.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.lines = append(t.lines, string(t.partial[:i]))
		t.partial = t.partial[i+1:]
		if len(t.lines) > t.max {
			t.lines = t.lines[len(t.lines)-t.max:]
		}
	}
	if len(t.partial) > 64<<10 {
		t.partial = t.partial[:0]
	}
	return len(p), nil
}

// cause picks the most telling line: the child's own error line, else the
// last line that looks like an error, else the last line.
func (t *tailBuffer) cause() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if len(t.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(t.partial))
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if _, msg, ok := strings.Cut(lines[i], childErrorPrefix); ok {
			return msg
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if strings.Contains(l, `"level":"fatal"`) || strings.Contains(l, `"level":"error"`) {
			return zapMessage(l)
		}
		if strings.HasPrefix(l, "E") || strings.HasPrefix(l, "F") || strings.HasPrefix(l, "panic:") {
			return strings.TrimSpace(l)
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			return s
		}
	}
	return ""
}

// zapMessage shortens one of etcd's JSON log lines to "msg: error".
func zapMessage(line string) string {
	var entry struct {
		Msg   string `json:"msg"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.Msg == "" {
		return strings.TrimSpace(line)
	}
	if entry.Error == "" {
		return entry.Msg
	}
	return entry.Msg + ": " + entry.Error
}
