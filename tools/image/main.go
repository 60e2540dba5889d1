// Command image builds the qleet container image without a Docker daemon: a static base layer (CA certificates,
// a nonroot user) and a layer with the qleet binary and its SPDX SBOM, one image per linux platform under one
// OCI index. It writes an OCI image layout (push it with `crane push <layout> <ref>` or
// `skopeo copy oci:<layout> docker://<ref>`), a docker-loadable tarball of one platform, and the SBOMs beside.
//
//	go run . -binary linux/amd64=../../dist/qleet_linux_amd64/qleet -version 0.1.0 -revision $(git rev-parse HEAD) \
//	  -layout ../../dist/image -chart ../../deploy/helm/qleet
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DefaultRepository is the repository the release pushes to and the chart's values.yaml names.
const DefaultRepository = "ghcr.io/qleetos/qleet"

type binaryFlag map[string]string

func (b binaryFlag) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaryFlag) Set(s string) error {
	p, path, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want platform=path, e.g. linux/amd64=dist/qleet_linux_amd64/qleet")
	}
	b[p] = path
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	bins := binaryFlag{}
	fs.Var(bins, "binary", "platform=path of a static qleet binary (repeat per platform)")
	o := Options{}
	fs.StringVar(&o.Version, "version", "", "release version: the image tag and its version label")
	fs.StringVar(&o.Revision, "revision", "", "VCS commit of the binaries")
	fs.StringVar(&o.Source, "source", "https://github.com/qleetos/terraform-provider-qleet", "source repository URL")
	fs.StringVar(&o.Licenses, "licenses", "NOASSERTION", "SPDX license expression of the image")
	fs.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM CA bundle copied into the image")
	created := fs.String("created", "", "build time, RFC 3339 (default: $SOURCE_DATE_EPOCH, else now)")
	repo := fs.String("repository", DefaultRepository, "image repository")
	layoutDir := fs.String("layout", "", "write the OCI image layout (index of every platform) to this directory")
	tarPath := fs.String("tar", "", "write a docker-loadable tarball of -tar-platform to this file")
	tarPlatform := fs.String("tar-platform", "linux/amd64", "platform of -tar")
	sbomDir := fs.String("sbom-dir", "", "also write each platform's SBOM to this directory")
	chart := fs.String("chart", "", "chart directory whose default image must be the one built")
	release := fs.Bool("release", false, "a release: the chart's appVersion must equal -version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Binaries = bins
	t, err := buildTime(*created)
	if err != nil {
		return err
	}
	o.Created = t
	ref, err := name.NewTag(*repo + ":" + o.Version)
	if err != nil {
		return fmt.Errorf("repository/version: %w", err)
	}
	if *chart != "" {
		if err := checkChart(*chart, ref, *release); err != nil {
			return err
		}
	}
	idx, images, err := Build(o)
	if err != nil {
		return err
	}
	if *layoutDir != "" {
		if err := WriteLayout(*layoutDir, ref, idx); err != nil {
			return err
		}
		d, _ := idx.Digest()
		fmt.Printf("%s: OCI layout of %s@%s\n", *layoutDir, ref, d)
	}
	if *tarPath != "" {
		img, ok := images[*tarPlatform]
		if !ok {
			return fmt.Errorf("tar-platform: no -binary for %s", *tarPlatform)
		}
		if err := tarball.WriteToFile(*tarPath, ref, img); err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		fmt.Printf("%s: docker tarball of %s (%s)\n", *tarPath, ref, *tarPlatform)
	}
	if *sbomDir != "" {
		for p, bin := range o.Binaries {
			doc, err := SBOM(bin, o.Version, p, o.Created)
			if err != nil {
				return err
			}
			f := filepath.Join(*sbomDir, fmt.Sprintf("qleet_%s_%s.spdx.json", o.Version, strings.ReplaceAll(p, "/", "_")))
			if err := os.WriteFile(f, doc, 0o644); err != nil {
				return fmt.Errorf("sbom-dir: %w", err)
			}
			fmt.Printf("%s: SBOM of qleet %s\n", f, p)
		}
	}
	return nil
}

// WriteLayout replaces dir with an OCI image layout whose index.json names idx by its full reference.
func WriteLayout(dir string, ref name.Tag, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.Name(),
	}))
}

// checkChart fails when the chart's default image is not ref's repository, or, for a release, not its tag.
func checkChart(dir string, ref name.Tag, release bool) error {
	repo, tag, appVersion, err := ChartImage(dir)
	if err != nil {
		return err
	}
	if repo != ref.Context().Name() {
		return fmt.Errorf("chart: %s/values.yaml image.repository is %q, the image built is %q", dir, repo, ref.Context().Name())
	}
	if tag != ref.TagStr() {
		if release {
			return fmt.Errorf("chart: %s runs tag %q by default (appVersion %q), the release builds %q: set appVersion in Chart.yaml", dir, tag, appVersion, ref.TagStr())
		}
		fmt.Fprintf(os.Stderr, "image: note: the chart defaults to tag %q; this snapshot is %q\n", tag, ref.TagStr())
	}
	return nil
}

func buildTime(s string) (time.Time, error) {
	if s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("created: %w", err)
		}
		return t.UTC(), nil
	}
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		var sec int64
		if _, err := fmt.Sscan(e, &sec); err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %q is not seconds since the epoch", e)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	return time.Now().UTC().Truncate(time.Second), nil
}
