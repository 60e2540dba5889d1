package releasetest

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"
)

// goreleaserConfig is the part of .goreleaser.yml that makes the provider's release files. The test reads
// it rather than repeating it, so that a change to the release's names or flags is a change to what the
// test installs.
type goreleaserConfig struct {
	ProjectName string `json:"project_name"`
	Builds      []struct {
		ID      string   `json:"id"`
		Main    string   `json:"main"`
		Binary  string   `json:"binary"`
		Env     []string `json:"env"`
		Flags   []string `json:"flags"`
		Ldflags []string `json:"ldflags"`
	} `json:"builds"`
	Archives []struct {
		ID           string   `json:"id"`
		Formats      []string `json:"formats"`
		NameTemplate string   `json:"name_template"`
	} `json:"archives"`
	Checksum struct {
		NameTemplate string `json:"name_template"`
		ExtraFiles   []struct {
			Glob         string `json:"glob"`
			NameTemplate string `json:"name_template"`
		} `json:"extra_files"`
	} `json:"checksum"`
	Signs []struct {
		Artifacts string   `json:"artifacts"`
		Cmd       string   `json:"cmd"`
		Args      []string `json:"args"`
		Signature string   `json:"signature"`
	} `json:"signs"`
}

// release is one provider version for one platform, packed as .goreleaser.yml packs it: the zip
// archive, the registry manifest, SHA256SUMS listing both, and SHA256SUMS's detached GPG signature.
type release struct {
	Version, OS, Arch string
	// Dir holds the files below.
	Dir                                      string
	ZipName, ManifestName, SumsName, SigName string
	// ZipSHA256 is the archive's checksum, as SHA256SUMS lists it.
	ZipSHA256 string
	// Protocols are the plugin protocol versions the manifest declares.
	Protocols []string
	// KeyID and ArmoredKey are the signing key's long ID and its public half.
	KeyID, ArmoredKey string
}

// packRelease builds the provider for this machine's platform at version, and packs and signs it the
// way .goreleaser.yml does (the `provider` build and archive, `checksum`, and `signs` run with gpg), with
// a throwaway key made in a temporary GNUPGHOME.
func packRelease(ctx context.Context, t *testing.T, root, version string) *release {
	t.Helper()
	var cfg goreleaserConfig
	raw, err := os.ReadFile(filepath.Join(root, ".goreleaser.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf(".goreleaser.yml: %v", err)
	}
	r := &release{Version: version, OS: runtime.GOOS, Arch: runtime.GOARCH, Dir: t.TempDir()}
	key := newSigningKey(ctx, t)
	r.KeyID, r.ArmoredKey = key.id, key.armored
	vars := map[string]any{"ProjectName": cfg.ProjectName, "Version": version, "Os": r.OS, "Arch": r.Arch,
		"Env": map[string]string{"GPG_FINGERPRINT": key.fingerprint}}
	render := func(field, tmpl string) string {
		t.Helper()
		tp, err := template.New(field).Option("missingkey=error").Parse(tmpl)
		if err != nil {
			t.Fatalf(".goreleaser.yml %s: %v", field, err)
		}
		var b strings.Builder
		if err := tp.Execute(&b, vars); err != nil {
			t.Fatalf(".goreleaser.yml %s %q: %v (the test knows ProjectName, Version, Os, Arch, Env.GPG_FINGERPRINT)", field, tmpl, err)
		}
		return b.String()
	}

	// builds[provider]: go build with its env, flags and ldflags.
	bi := -1
	for i, b := range cfg.Builds {
		if b.ID == "provider" {
			bi = i
		}
	}
	if bi < 0 {
		t.Fatal(".goreleaser.yml has no build with id provider")
	}
	b := cfg.Builds[bi]
	binName := render("builds.binary", b.Binary)
	buildDir := t.TempDir()
	args := append([]string{"build"}, b.Flags...)
	for _, l := range b.Ldflags {
		args = append(args, "-ldflags", render("builds.ldflags", l))
	}
	args = append(args, "-o", filepath.Join(buildDir, binName), b.Main)
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = root
	build.Env = append(append(os.Environ(), b.Env...), "GOOS="+r.OS, "GOARCH="+r.Arch)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	// archives[provider]: a zip of the binary and the README, as goreleaser's default files add it.
	ai := -1
	for i, a := range cfg.Archives {
		if a.ID == "provider" {
			ai = i
		}
	}
	if ai < 0 || len(cfg.Archives[ai].Formats) != 1 || cfg.Archives[ai].Formats[0] != "zip" {
		t.Fatal(".goreleaser.yml: want an archive with id provider and formats [zip] (the registry protocol serves zips)")
	}
	r.ZipName = render("archives.name_template", cfg.Archives[ai].NameTemplate) + ".zip"
	writeZip(t, filepath.Join(r.Dir, r.ZipName), map[string]string{
		binName:     filepath.Join(buildDir, binName),
		"README.md": filepath.Join(root, "README.md"),
	})

	// checksum.extra_files: the registry manifest, renamed.
	for _, f := range cfg.Checksum.ExtraFiles {
		if f.Glob == "terraform-registry-manifest.json" {
			r.ManifestName = render("checksum.extra_files.name_template", f.NameTemplate)
		}
	}
	if r.ManifestName == "" {
		t.Fatal(".goreleaser.yml: checksum.extra_files must include terraform-registry-manifest.json (the registry reads the protocols there)")
	}
	manifest, err := os.ReadFile(filepath.Join(root, "terraform-registry-manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Metadata struct {
			ProtocolVersions []string `json:"protocol_versions"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil || len(m.Metadata.ProtocolVersions) == 0 {
		t.Fatalf("terraform-registry-manifest.json: no metadata.protocol_versions (%v)", err)
	}
	r.Protocols = m.Metadata.ProtocolVersions
	if err := os.WriteFile(filepath.Join(r.Dir, r.ManifestName), manifest, 0o644); err != nil {
		t.Fatal(err)
	}

	// checksum: "<sha256>  <name>" per file, the format of sha256sum and goreleaser.
	r.SumsName = render("checksum.name_template", cfg.Checksum.NameTemplate)
	var sums strings.Builder
	for _, name := range []string{r.ManifestName, r.ZipName} {
		sum := sha256File(t, filepath.Join(r.Dir, name))
		if name == r.ZipName {
			r.ZipSHA256 = sum
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, name)
	}
	if err := os.WriteFile(filepath.Join(r.Dir, r.SumsName), []byte(sums.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	// signs: the checksum file, with the configured command and arguments (goreleaser's defaults: gpg,
	// ${artifact}.sig).
	if len(cfg.Signs) != 1 || cfg.Signs[0].Artifacts != "checksum" {
		t.Fatalf(".goreleaser.yml: want one signs entry for artifacts: checksum, have %+v", cfg.Signs)
	}
	s := cfg.Signs[0]
	sig := s.Signature
	if sig == "" {
		sig = "${artifact}.sig"
	}
	r.SigName = strings.ReplaceAll(sig, "${artifact}", r.SumsName)
	cmd := s.Cmd
	if cmd == "" {
		cmd = "gpg"
	}
	var sargs []string
	for _, a := range s.Args {
		a = strings.NewReplacer("${artifact}", r.SumsName, "${signature}", r.SigName).Replace(a)
		sargs = append(sargs, render("signs.args", a))
	}
	key.run(ctx, t, r.Dir, cmd, sargs...)
	if _, err := os.Stat(filepath.Join(r.Dir, r.SigName)); err != nil {
		t.Fatalf("%s %s made no %s: %v", cmd, strings.Join(sargs, " "), r.SigName, err)
	}
	return r
}

func writeZip(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		h, err := zip.FileInfoHeader(info)
		if err != nil {
			t.Fatal(err)
		}
		h.Name, h.Method = name, zip.Deflate
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// signingKey is a throwaway GPG key in its own GNUPGHOME.
type signingKey struct {
	home                     string
	fingerprint, id, armored string
}

// newSigningKey makes an unprotected RSA signing key in a temporary GNUPGHOME with /usr/bin/gpg (what
// goreleaser's signs step runs), and stops that home's gpg-agent when the test ends.
func newSigningKey(ctx context.Context, t *testing.T) *signingKey {
	t.Helper()
	if _, err := exec.LookPath("gpg"); err != nil {
		t.Fatalf("gpg signs the release's SHA256SUMS, as in .goreleaser.yml: %v", err)
	}
	// gpg-agent's socket path must stay short: a home under t.TempDir() can pass the 108-byte limit.
	home, err := os.MkdirTemp("", "gpg-")
	if err != nil {
		t.Fatal(err)
	}
	k := &signingKey{home: home}
	t.Cleanup(func() {
		kill := exec.Command("gpgconf", "--kill", "gpg-agent")
		kill.Env = append(os.Environ(), "GNUPGHOME="+home)
		_ = kill.Run()
		_ = os.RemoveAll(home)
	})
	k.run(ctx, t, home, "gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "",
		"--quick-generate-key", "QleetOS test release <release-test@example.invalid>", "rsa3072", "sign", "never")
	for _, line := range strings.Split(k.run(ctx, t, home, "gpg", "--batch", "--with-colons", "--list-secret-keys"), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" && len(f) > 9 && k.fingerprint == "" {
			k.fingerprint = f[9]
		}
	}
	if len(k.fingerprint) != 40 {
		t.Fatalf("gpg: no fingerprint for the new key (%q)", k.fingerprint)
	}
	k.id = k.fingerprint[24:]
	k.armored = k.run(ctx, t, home, "gpg", "--batch", "--armor", "--export", k.fingerprint)
	return k
}

// run runs a gpg command with the key's GNUPGHOME in dir and returns its standard output.
func (k *signingKey) run(ctx context.Context, t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GNUPGHOME="+k.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}
