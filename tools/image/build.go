package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and identity inside the image.
const (
	// Entrypoint is where the qleet binary is in the image; the chart passes only args (api, controller, agent).
	Entrypoint = "/usr/local/bin/qleet"
	// SBOMPath is where the SPDX document describing the binary is in the image.
	SBOMPath = "/usr/share/doc/qleet/sbom.spdx.json"
	// CACertsPath is where the CA bundle is in the image (Go's crypto/x509 looks there on Linux).
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// UID and GID of the non-root user the image runs as (the chart's securityContext uses the same).
	UID = 65532
	// User is the image config's user, numeric so that runAsNonRoot can verify it.
	User = "65532:65532"
)

// Options describe one release of the image.
type Options struct {
	// Binaries maps a platform ("linux/amd64") to the path of a static qleet binary built for it.
	Binaries map[string]string
	// Version is the release version (the image tag and the version label).
	Version string
	// Revision is the VCS commit the binaries were built from.
	Revision string
	// Source is the repository URL (org.opencontainers.image.source).
	Source string
	// Licenses is an SPDX license expression (org.opencontainers.image.licenses).
	Licenses string
	// Created is the build time recorded in the config and the layers; a fixed value makes the image reproducible.
	Created time.Time
	// CACerts is the path of the PEM CA bundle copied into the base layer.
	CACerts string
}

// Labels returns the OCI annotations-as-labels of the image config.
func (o Options) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "qleet",
		"org.opencontainers.image.description": "QleetOS control plane and CLI: qleet api, qleet controller, qleet agent",
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.url":         o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.licenses":    o.Licenses,
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
	}
}

func (o Options) validate() error {
	if len(o.Binaries) == 0 {
		return fmt.Errorf("binaries: at least one platform=path is required")
	}
	for p, path := range o.Binaries {
		if _, err := parsePlatform(p); err != nil {
			return err
		}
		if path == "" {
			return fmt.Errorf("binaries: platform %q has an empty path", p)
		}
	}
	for field, v := range map[string]string{"version": o.Version, "revision": o.Revision, "source": o.Source, "licenses": o.Licenses, "ca-certs": o.CACerts} {
		if v == "" {
			return fmt.Errorf("%s: must not be empty", field)
		}
	}
	return nil
}

func parsePlatform(s string) (v1.Platform, error) {
	os, arch, ok := strings.Cut(s, "/")
	if !ok || os != "linux" || arch == "" || strings.Contains(arch, "/") {
		return v1.Platform{}, fmt.Errorf("binaries: platform %q is not linux/<arch>", s)
	}
	return v1.Platform{OS: os, Architecture: arch}, nil
}

// Build makes one image per platform and the index over them, in platform order.
func Build(o Options) (v1.ImageIndex, map[string]v1.Image, error) {
	if err := o.validate(); err != nil {
		return nil, nil, err
	}
	base, err := baseLayer(o)
	if err != nil {
		return nil, nil, err
	}
	platforms := make([]string, 0, len(o.Binaries))
	for p := range o.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	images := map[string]v1.Image{}
	for _, p := range platforms {
		plat, _ := parsePlatform(p)
		img, err := platformImage(o, base, plat, o.Binaries[p])
		if err != nil {
			return nil, nil, fmt.Errorf("image for %s: %w", p, err)
		}
		images[p] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &plat},
		})
	}
	return idx, images, nil
}

func platformImage(o Options, base v1.Layer, plat v1.Platform, binPath string) (v1.Image, error) {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return nil, fmt.Errorf("binaries: %w", err)
	}
	sbom, err := SBOM(binPath, o.Version, plat.OS+"/"+plat.Architecture, o.Created)
	if err != nil {
		return nil, err
	}
	app, err := layer(o.Created, []entry{
		{name: "usr/", dir: true},
		{name: "usr/local/", dir: true},
		{name: "usr/local/bin/", dir: true},
		{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: bin},
		{name: "usr/share/", dir: true},
		{name: "usr/share/doc/", dir: true},
		{name: "usr/share/doc/qleet/", dir: true},
		{name: strings.TrimPrefix(SBOMPath, "/"), mode: 0o644, data: sbom},
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, base, app)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: o.Created}
	cf.Author = o.Source
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.Cmd = []string{"--help"}
	cf.Config.User = User
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SSL_CERT_FILE=" + CACertsPath,
		"HOME=/home/nonroot",
	}
	cf.Config.Labels = o.Labels()
	cf.History = []v1.History{
		{Created: cf.Created, CreatedBy: "qleetos tools/image: base (CA certificates, nonroot user)", Comment: "static base"},
		{Created: cf.Created, CreatedBy: "qleetos tools/image: qleet " + o.Version + " and its SBOM"},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, o.Labels()).(v1.Image), nil
}

// baseLayer is the static base: a CA bundle, passwd and group naming the nonroot user, /tmp and a home.
func baseLayer(o Options) (v1.Layer, error) {
	ca, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("ca-certs: %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("ca-certs: %s holds no PEM certificate", o.CACerts)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID)
	group := fmt.Sprintf("root:x:0:\nnobody:x:65534:\nnonroot:x:%d:\n", UID)
	return layer(o.Created, []entry{
		{name: "etc/", dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/ssl/", dir: true},
		{name: "etc/ssl/certs/", dir: true},
		{name: strings.TrimPrefix(CACertsPath, "/"), mode: 0o644, data: ca},
		{name: "home/", dir: true},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: UID},
		{name: "tmp/", dir: true, mode: 0o1777},
	})
}

type entry struct {
	name string
	dir  bool
	mode int64
	uid  int
	data []byte
}

// layer writes entries into an uncompressed tar with fixed owners and times, and wraps it as a gzip OCI layer.
func layer(mtime time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, ModTime: mtime, Uid: e.uid, Gid: e.uid, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
			if e.mode != 0 {
				h.Mode = e.mode
			}
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, e.mode, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
