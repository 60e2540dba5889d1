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

// child is one part of the cluster running as a re-executed kubesim.
type child struct {
	part string
	cmd  *exec.Cmd
	log  *os.File
	tail *tailBuffer
	done chan struct{}
	err  error // valid once done is closed
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
	if err := c.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start: %w", part, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	return c, nil
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
// sends SIGKILL. It returns once the child has been reaped.
func (c *child) stop(grace time.Duration) {
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
