package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// Helm, without Helm's install machinery.
//
// QleetOS renders charts client-side (as `helm template` does) and applies the objects itself, so it
// needs Helm's chart loader and template engine, and a way to fetch a chart. It does not use Helm's
// action package or its getters: they bring kubectl, cli-runtime and kustomize (about 200 packages,
// the largest share of a cold build of qleet after the Kubernetes API types), none of which runs here.

// Template renders chrt with vals as `helm template --include-crds` does for a first install of the
// release named release in namespace: dependencies are resolved and their values merged, values are
// checked against the chart's schema, the chart's kubeVersion range is checked against kubeVersion (e.g.
// "v1.31.4"; empty means Helm's default), NOTES.txt and hooks are left out, and the CRDs of crds/ come
// first, then the manifests in Helm's install order. It returns one YAML stream.
func Template(chrt *chart.Chart, vals map[string]any, release, namespace, kubeVersion string) (string, error) {
	if err := chartutil.ValidateReleaseName(release); err != nil {
		return "", fmt.Errorf("release name %q: %w", release, err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
		return "", err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if kubeVersion != "" {
		if kv, err := chartutil.ParseKubeVersion(kubeVersion); err == nil {
			caps.KubeVersion = *kv
		}
	}
	if c := chrt.Metadata.KubeVersion; c != "" && !chartutil.IsCompatibleRange(c, caps.KubeVersion.String()) {
		return "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", c, caps.KubeVersion.String())
	}
	values, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return "", err
	}
	files, err := engine.Render(chrt, values)
	if err != nil {
		return "", err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, crd := range chrt.CRDObjects() {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, crd.File.Data)
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return b.String(), nil
}

// chartFetchTimeout bounds each download of an index or a chart.
const chartFetchTimeout = 2 * time.Minute

// fetchChart downloads the chart h names into dir and returns the archive's path. h.Repository is an
// OCI registry (oci://) or a chart repository (its index.yaml); h.Version is a version or a range
// ("^1.2"), and empty means the newest stable version, as with Helm.
func fetchChart(ctx context.Context, h chartRef, dir string) (string, error) {
	var version string
	var data []byte
	var err error
	if registry.IsOCI(h.Repository) {
		version, data, err = pullOCI(h, dir)
	} else {
		version, data, err = fetchFromIndex(ctx, h)
	}
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, unsafeFileChars.ReplaceAllString(h.Chart+"-"+version, "_")+".tgz")
	tmp, err := os.CreateTemp(dir, ".chart-*")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// chartRef names a chart in a repository.
type chartRef struct{ Repository, Chart, Version string }

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// pullOCI pulls the chart from an OCI registry, resolving a range or an empty version from its tags.
func pullOCI(h chartRef, dir string) (string, []byte, error) {
	rc, err := registry.NewClient(registry.ClientOptWriter(io.Discard),
		registry.ClientOptCredentialsFile(filepath.Join(dir, "registry.json")))
	if err != nil {
		return "", nil, err
	}
	ref := strings.TrimPrefix(strings.TrimSuffix(h.Repository, "/"), "oci://") + "/" + h.Chart
	version := h.Version
	if _, err := semver.StrictNewVersion(version); err != nil {
		tags, err := rc.Tags(ref)
		if err != nil {
			return "", nil, err
		}
		if version, err = newestMatching(h.Version, tags); err != nil {
			return "", nil, err
		}
	}
	res, err := rc.Pull(ref + ":" + version)
	if err != nil {
		return "", nil, err
	}
	return version, res.Chart.Data, nil
}

// repoIndex is the part of a chart repository's index.yaml that a download needs.
type repoIndex struct {
	Entries map[string][]struct {
		Version string   `json:"version"`
		URLs    []string `json:"urls"`
		Digest  string   `json:"digest"`
	} `json:"entries"`
}

// fetchFromIndex reads the repository's index.yaml, picks the version, downloads the chart (its URL
// may be relative to the repository) and checks its digest when the index gives one.
func fetchFromIndex(ctx context.Context, h chartRef) (string, []byte, error) {
	base, err := url.Parse(strings.TrimSuffix(h.Repository, "/") + "/")
	if err != nil {
		return "", nil, fmt.Errorf("repository: %w", err)
	}
	raw, err := httpGet(ctx, base.JoinPath("index.yaml"))
	if err != nil {
		return "", nil, fmt.Errorf("looks like %q is not a valid chart repository or cannot be reached: %w", h.Repository, err)
	}
	var idx repoIndex
	if err := yaml.Unmarshal(raw, &idx); err != nil {
		return "", nil, fmt.Errorf("%s: index.yaml: %w", h.Repository, err)
	}
	entries := idx.Entries[h.Chart]
	if len(entries) == 0 {
		return "", nil, fmt.Errorf("chart %q not found in %s", h.Chart, h.Repository)
	}
	versions := make([]string, len(entries))
	for i, e := range entries {
		versions[i] = e.Version
	}
	version, err := newestMatching(h.Version, versions)
	if err != nil {
		return "", nil, err
	}
	for _, e := range entries {
		if e.Version != version {
			continue
		}
		if len(e.URLs) == 0 {
			return "", nil, fmt.Errorf("chart %q version %s has no download URL in %s", h.Chart, version, h.Repository)
		}
		u, err := base.Parse(e.URLs[0])
		if err != nil {
			return "", nil, fmt.Errorf("chart %q version %s: URL: %w", h.Chart, version, err)
		}
		data, err := httpGet(ctx, u)
		if err != nil {
			return "", nil, err
		}
		if e.Digest != "" {
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, strings.TrimPrefix(e.Digest, "sha256:")) {
				return "", nil, fmt.Errorf("chart %q version %s: digest %s, the index says %s", h.Chart, version, got, e.Digest)
			}
		}
		return version, data, nil
	}
	return "", nil, fmt.Errorf("chart %q version %s not found in %s", h.Chart, version, h.Repository)
}

// newestMatching picks, among versions, the one asked for: an exact match first, else the newest that
// the range satisfies ("" is any stable version).
func newestMatching(want string, versions []string) (string, error) {
	for _, v := range versions {
		if want != "" && v == want {
			return v, nil
		}
	}
	rng := want
	if rng == "" {
		rng = "*"
	}
	c, err := semver.NewConstraint(rng)
	if err != nil {
		return "", fmt.Errorf("version %q: %w", want, err)
	}
	var ok []*semver.Version
	byParsed := map[*semver.Version]string{}
	for _, v := range versions {
		sv, err := semver.NewVersion(v)
		if err != nil || !c.Check(sv) {
			continue
		}
		ok = append(ok, sv)
		byParsed[sv] = v
	}
	if len(ok) == 0 {
		if want == "" {
			return "", errors.New("no stable version found")
		}
		return "", fmt.Errorf("no version matches %q", want)
	}
	sort.Sort(sort.Reverse(semver.Collection(ok)))
	return byParsed[ok[0]], nil
}

// httpGet reads u whole, within chartFetchTimeout. Credentials in the repository URL go with requests to
// its own host only, as Helm does by default.
func httpGet(ctx context.Context, u *url.URL) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, chartFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
	}
	return io.ReadAll(resp.Body)
}
