package kubesim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// BinaryEnv names the environment variable that points at a kubesim binary.
const BinaryEnv = "QLEET_KUBESIM_BIN"

// ModulePath is the main module's path, used to recognise the repository root.
const ModulePath = "github.com/qleetos/terraform-provider-qleet"

// ErrBinaryNotFound is returned (wrapped) by FindBinary when no kubesim
// binary is available.
var ErrBinaryNotFound = errors.New("kubesim binary not found")

// FindBinary returns the kubesim executable: $QLEET_KUBESIM_BIN if set (it
// must exist), else <repo root>/bin/kubesim, else kubesim on PATH.
func FindBinary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if err := isExecutable(p); err != nil {
			return "", fmt.Errorf("kubesim: $%s=%s: %w", BinaryEnv, p, err)
		}
		return p, nil
	}
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, "bin", "kubesim")
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("kubesim"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("kubesim: %w: set $%s, run `make kubesim`, or put kubesim on PATH", ErrBinaryNotFound, BinaryEnv)
}

// RepoRoot finds the repository root: the nearest directory at or above the
// working directory whose go.mod declares ModulePath.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("kubesim: no go.mod for %s at or above the working directory", ModulePath)
		}
		dir = parent
	}
}

// Build compiles tools/kubesim into <repoRoot>/bin/kubesim, as
// `make kubesim` does, and returns the binary's path. It builds to a
// temporary name and renames, so that concurrent builds (parallel test
// processes) never expose a half-written binary.
func Build(ctx context.Context, repoRoot string) (string, error) {
	binDir := filepath.Join(repoRoot, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("kubesim: build: %w", err)
	}
	target := filepath.Join(binDir, "kubesim")
	tmp := filepath.Join(binDir, ".kubesim-build-"+strconv.Itoa(os.Getpid()))
	dir := filepath.Join(repoRoot, "tools", "kubesim")
	// The same version stamp as `make kubesim`, so the API server reports its real version.
	ldflags, err := exec.CommandContext(ctx, filepath.Join(dir, "version-ldflags.sh")).Output()
	if err != nil {
		return "", fmt.Errorf("kubesim: version-ldflags.sh: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", string(ldflags), "-o", tmp, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("kubesim: go build in %s: %w: %s", cmd.Dir, err, lastLines(out.String(), 10))
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("kubesim: build: %w", err)
	}
	return target, nil
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("not an executable file")
	}
	return nil
}

func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
