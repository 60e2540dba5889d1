package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBadInput: each mistake gives one clear line naming the part and the
// cause, a non-zero exit, and no process left behind.
func TestBadInput(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)

	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	corrupt := t.TempDir()
	if err := os.WriteFile(filepath.Join(corrupt, "state.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	badEtcd := t.TempDir()
	if err := os.MkdirAll(filepath.Join(badEtcd, "etcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	// etcd expects a directory here; a file makes it fail during start-up.
	if err := os.WriteFile(filepath.Join(badEtcd, "etcd", "member"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		code int
		want []string // substrings of the one stderr line
	}{
		{"unknown flag", []string{"run", "--data-dir", t.TempDir(), "--bogus"}, 2, []string{"kubesim: run:", "bogus"}},
		{"missing data dir", []string{"run"}, 2, []string{"--data-dir is required"}},
		{"unknown command", []string{"start"}, 2, []string{`unknown command "start"`}},
		{"bad node count", []string{"run", "--data-dir", t.TempDir(), "--nodes", "-1"}, 2, []string{"--nodes"}},
		{"unwritable data dir", []string{"run", "--data-dir", filepath.Join(file, "sub")}, 1, []string{"kubesim: data dir:", "not a directory"}},
		{"corrupt state", []string{"run", "--data-dir", corrupt}, 1, []string{"kubesim: data dir:", "state.json is corrupt"}},
		{"port in use", []string{"run", "--data-dir", t.TempDir(), "--port", busyPort}, 1, []string{"kubesim: kube-apiserver: port " + busyPort + " is in use"}},
		{"part dies during start-up", []string{"run", "--data-dir", badEtcd}, 1, []string{"kubesim: etcd: exited during start-up:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := runKubesim(t, 2*time.Minute, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			last := lastLine(stderr)
			for _, w := range tt.want {
				if !strings.Contains(last, w) {
					t.Errorf("last stderr line %q does not contain %q", last, w)
				}
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
