package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dataDir is the layout of a cluster's data directory.
//
//	DIR/kubesim.lock   flock held by the running kubesim
//	DIR/state.json     name, region and the ports chosen on first start
//	DIR/kubeconfig     admin kubeconfig (system:masters)
//	DIR/pki/           CA, serving and client certificates, service-account key
//	DIR/etcd/          etcd data
//	DIR/logs/          one log file per part
type dataDir string

func (d dataDir) path(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}

// state is what a cluster remembers between starts.
type state struct {
	Name           string   `json:"name"`
	Region         string   `json:"region"`
	Zones          []string `json:"zones"`
	Nodes          int      `json:"nodes"`
	APIServerPort  int      `json:"apiserver_port"`
	EtcdClientPort int      `json:"etcd_client_port"`
	EtcdPeerPort   int      `json:"etcd_peer_port"`
}

// prepare creates the layout and checks that the directory is writable.
func (d dataDir) prepare() error {
	for _, sub := range []string{"", "pki", "etcd", "logs"} {
		if err := os.MkdirAll(d.path(sub), 0o700); err != nil {
			return err
		}
	}
	probe := d.path(".write-probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return err
	}
	return os.Remove(probe)
}

// lock takes an exclusive flock on DIR/kubesim.lock so that two kubesims
// never share a data directory. The lock goes away with the process.
func (d dataDir) lock() (*os.File, error) {
	f, err := os.OpenFile(d.path("kubesim.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(d.path("kubesim.lock"))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another kubesim (pid %s)", d, strings.TrimSpace(string(owner)))
		}
		return nil, err
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// loadState reads state.json; a missing file means a new cluster.
func (d dataDir) loadState() (state, bool, error) {
	var s state
	b, err := os.ReadFile(d.path("state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, false, fmt.Errorf("state.json is corrupt: %w", err)
	}
	return s, true, nil
}

func (d dataDir) saveState(s state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(d.path("state.json"), append(b, '\n'), 0o600)
}

// writeFileAtomic writes through a temporary file and a rename, so that a
// crash never leaves a half-written file behind.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
