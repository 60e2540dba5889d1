package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const repoRoot = "../.."

// buildQleet builds ./controlplane/cmd/qleet for linux/GOARCH the way the release does (static, trimmed,
// version and commit stamped) and returns its path.
func buildQleet(t *testing.T, version, commit string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("runs the linux binary from the image layer; needs a linux host")
	}
	bin := filepath.Join(t.TempDir(), "qleet")
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.version="+version+" -X main.commit="+commit,
		"-o", bin, "./controlplane/cmd/qleet")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build qleet: %v\n%s", err, out)
	}
	return bin
}

// TestImageLayout builds the image from a freshly built qleet into an OCI layout, reads it back from disk and
// checks what a cluster relies on: the entrypoint, the non-root user, the labels, the CA bundle, the SBOM, that
// the binary from the layer runs, and that the chart's default image is this one.
func TestImageLayout(t *testing.T) {
	const version, commit = "0.0.0-test.1", "0123456789abcdef0123456789abcdef01234567"
	bin := buildQleet(t, version, commit)
	platform := "linux/" + runtime.GOARCH
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "layout")
	tarPath := filepath.Join(t.TempDir(), "image.tar")
	err := run([]string{
		"-binary", platform + "=" + bin,
		"-version", version, "-revision", commit, "-licenses", "MPL-2.0",
		"-created", created.Format(time.RFC3339),
		"-layout", dir, "-tar", tarPath, "-tar-platform", platform,
		"-chart", filepath.Join(repoRoot, "deploy/helm/qleet"),
	})
	if err != nil {
		t.Fatal(err)
	}

	// The layout on disk: index.json names the image by its full reference; the index has our platform.
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(im.Manifests))
	}
	refName := im.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	ref, err := name.NewTag(refName)
	if err != nil {
		t.Fatalf("ref.name %q: %v", refName, err)
	}
	if got, want := ref.Name(), DefaultRepository+":"+version; got != want {
		t.Errorf("image reference = %s, want %s", got, want)
	}
	idx, err := top.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	img := imageFor(t, idx, platform)

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/usr/local/bin/qleet" {
		t.Errorf("entrypoint = %q, want [/usr/local/bin/qleet]", got)
	}
	uid, _, _ := strings.Cut(cf.Config.User, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("user = %q, want a non-root numeric user", cf.Config.User)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user = %q, want 65532:65532 (the chart's runAsUser)", cf.Config.User)
	}
	if cf.OS+"/"+cf.Architecture != platform {
		t.Errorf("config platform = %s/%s, want %s", cf.OS, cf.Architecture, platform)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/qleetos/terraform-provider-qleet",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": commit,
		"org.opencontainers.image.licenses": "MPL-2.0",
		"org.opencontainers.image.created":  "2026-01-02T03:04:05Z",
	}
	for k, want := range wantLabels {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}

	files := extract(t, img)
	entry, ok := files["usr/local/bin/qleet"]
	if !ok {
		t.Fatal("usr/local/bin/qleet is not in the image")
	}
	if entry.mode&0o111 == 0 {
		t.Errorf("usr/local/bin/qleet mode %o is not executable", entry.mode)
	}
	// The base has no libc: the binary must be static (no ELF interpreter).
	ef, err := elf.NewFile(bytes.NewReader(entry.data))
	if err != nil {
		t.Fatalf("usr/local/bin/qleet: %v", err)
	}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Error("usr/local/bin/qleet is dynamically linked; the static base has no libc")
		}
	}
	ca, ok := files["etc/ssl/certs/ca-certificates.crt"]
	if !ok {
		t.Fatal("etc/ssl/certs/ca-certificates.crt is not in the image")
	}
	if !x509.NewCertPool().AppendCertsFromPEM(ca.data) {
		t.Error("the image's CA bundle holds no certificate")
	}
	if pw := string(files["etc/passwd"].data); !strings.Contains(pw, "nonroot:x:65532:65532:") {
		t.Errorf("etc/passwd does not name user 65532:\n%s", pw)
	}
	if tmp := files["tmp"]; tmp.mode&0o1777 != 0o1777 {
		t.Errorf("/tmp mode = %o, want 1777", tmp.mode)
	}

	// The SBOM describes this binary: its main module at the release version, its dependencies, the Go toolchain.
	sbom, ok := files["usr/share/doc/qleet/sbom.spdx.json"]
	if !ok {
		t.Fatal("usr/share/doc/qleet/sbom.spdx.json is not in the image")
	}
	var doc spdxDocument
	if err := json.Unmarshal(sbom.data, &doc); err != nil {
		t.Fatalf("SBOM: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || len(doc.Packages) < 3 {
		t.Fatalf("SBOM: version %q with %d packages", doc.SPDXVersion, len(doc.Packages))
	}
	if got := doc.Packages[0]; got.Name != "github.com/qleetos/terraform-provider-qleet" || got.VersionInfo != version {
		t.Errorf("SBOM main package = %s %s", got.Name, got.VersionInfo)
	}
	pkgs := map[string]string{}
	for _, pk := range doc.Packages {
		pkgs[pk.Name] = pk.VersionInfo
	}
	if pkgs["stdlib"] != runtime.Version() {
		t.Errorf("SBOM stdlib = %q, want %q", pkgs["stdlib"], runtime.Version())
	}
	if v := pkgs["github.com/spf13/cobra"]; !strings.HasPrefix(v, "v") {
		t.Errorf("SBOM lacks github.com/spf13/cobra with a version (got %q)", v)
	}

	// The binary from the layer runs and reports the version and commit stamped at build time.
	exe := filepath.Join(t.TempDir(), "qleet")
	if err := os.WriteFile(exe, entry.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("qleet version from the layer: %v", err)
	}
	var v struct {
		Version, Commit, Platform string
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("qleet version -o json: %v\n%s", err, out)
	}
	if v.Version != version || v.Commit != commit || v.Platform != platform {
		t.Errorf("qleet version = %+v, want %s %s %s", v, version, commit, platform)
	}

	// The chart runs this repository by default, with the tag its appVersion names.
	repo, tag, appVersion, err := ChartImage(filepath.Join(repoRoot, "deploy/helm/qleet"))
	if err != nil {
		t.Fatal(err)
	}
	if repo != ref.Context().Name() {
		t.Errorf("chart image.repository = %s, image = %s", repo, ref.Context().Name())
	}
	if tag != appVersion {
		t.Errorf("chart default tag = %q, want its appVersion %q (values.yaml image.tag must stay empty)", tag, appVersion)
	}

	// The docker tarball holds the same image under the same name.
	timg, err := tarball.ImageFromPath(tarPath, &ref)
	if err != nil {
		t.Fatal(err)
	}
	td, _ := timg.ConfigName()
	ld, _ := img.ConfigName()
	if td != ld {
		t.Errorf("tarball config %s != layout config %s", td, ld)
	}
}

// TestImageChartMismatch: a release whose version is not the chart's appVersion, or a repository the chart does
// not name, is refused before anything is written.
func TestImageChartMismatch(t *testing.T) {
	chart := filepath.Join(repoRoot, "deploy/helm/qleet")
	_, tag, _, err := ChartImage(chart)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	base := []string{"-binary", "linux/amd64=/nonexistent", "-revision", "x", "-layout", dir, "-chart", chart}
	err = run(append(base, "-version", tag+"-other", "-release"))
	if err == nil || !strings.Contains(err.Error(), "appVersion") {
		t.Errorf("release of another version: err = %v, want it to name appVersion", err)
	}
	err = run(append(base, "-version", tag, "-release", "-repository", "ghcr.io/someone/else"))
	if err == nil || !strings.Contains(err.Error(), "image.repository") {
		t.Errorf("another repository: err = %v, want it to name image.repository", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("layout written despite the error: %v", err)
	}
}

// TestImageBadInput: every missing or malformed option is refused with an error naming it.
func TestImageBadInput(t *testing.T) {
	ca := "/etc/ssl/certs/ca-certificates.crt"
	good := Options{Binaries: map[string]string{"linux/amd64": "x"}, Version: "1", Revision: "r", Source: "s", Licenses: "l", CACerts: ca}
	cases := map[string]func(o *Options){
		"binaries": func(o *Options) { o.Binaries = nil },
		"platform": func(o *Options) { o.Binaries = map[string]string{"darwin/arm64": "x"} },
		"version":  func(o *Options) { o.Version = "" },
		"revision": func(o *Options) { o.Revision = "" },
		"licenses": func(o *Options) { o.Licenses = "" },
		"ca-certs": func(o *Options) { o.CACerts = "" },
	}
	for field, mut := range cases {
		o := good
		mut(&o)
		_, _, err := Build(o)
		if err == nil || !strings.Contains(err.Error(), strings.Split(field, "/")[0]) {
			t.Errorf("%s: err = %v, want it to name the field", field, err)
		}
	}
	if _, err := buildTime("yesterday"); err == nil || !strings.Contains(err.Error(), "created") {
		t.Errorf("bad -created: err = %v", err)
	}
}

func imageFor(t *testing.T, idx v1.ImageIndex, platform string) v1.Image {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS+"/"+d.Platform.Architecture == platform {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("no %s manifest in the index", platform)
	return nil
}

type file struct {
	mode int64
	data []byte
}

// extract flattens the image's layers as a runtime would and returns every entry by path.
func extract(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]file{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		// A directory is listed as "tmp/" in its layer, and as "tmp" once flattened: key both by the clean path.
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = file{mode: h.Mode, data: b}
	}
}
