package render

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// TestTemplateRendersAsHelmDoes compares Template with Helm's own client-side install (what `helm
// template --include-crds` runs) on the same chart: the same manifest, byte for byte.
func TestTemplateRendersAsHelmDoes(t *testing.T) {
	t.Parallel()
	files := map[string]string{"templates/NOTES.txt": "Thanks for installing {{ .Release.Name }}.\n",
		"templates/service.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  ports: [{port: 80}]\n",
		"templates/sa.yaml":      "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {{ .Release.Name }}\n"}
	for k, v := range demoChart {
		files[k] = v
	}
	chrt, err := loader.Load(writeChart(t, files))
	require.NoError(t, err)
	vals := map[string]any{"replicas": 3}

	in := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	in.DryRun, in.ClientOnly, in.Replace, in.IncludeCRDs, in.DisableHooks = true, true, true, true, true
	in.ReleaseName, in.Namespace = "web", "apps"
	kv, err := chartutil.ParseKubeVersion("v1.31.4")
	require.NoError(t, err)
	in.KubeVersion = kv
	rel, err := in.RunWithContext(context.Background(), chrt, vals)
	require.NoError(t, err)

	got, err := Template(chrt, vals, "web", "apps", "v1.31.4")
	require.NoError(t, err)
	require.Equal(t, rel.Manifest, got)
	require.NotContains(t, got, "Thanks for installing", "NOTES.txt is not a manifest")
	require.NotContains(t, got, "helm.sh/hook", "hooks are left out")
	require.Less(t, strings.Index(got, "CustomResourceDefinition"), strings.Index(got, "kind: ServiceAccount"), "CRDs come first")
	require.Less(t, strings.Index(got, "kind: ServiceAccount"), strings.Index(got, "kind: Service\n"), "then Helm's install order")
}

func TestTemplateRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		chartYAML, values, release, want string
	}{
		"a chart for another Kubernetes": {chartYAML: "apiVersion: v2\nname: demo\nversion: 0.1.0\nkubeVersion: '>=1.40.0'\n",
			release: "web", want: "chart requires kubeVersion: >=1.40.0 which is incompatible with Kubernetes v1.31.4"},
		"values the schema rejects": {values: `{"type":"object","properties":{"replicas":{"type":"integer"}}}`,
			release: "web", want: "replicas"},
		"a release name Helm would refuse": {release: "Not_A_Name", want: `release name "Not_A_Name"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{}
			for k, v := range demoChart {
				files[k] = v
			}
			if tc.chartYAML != "" {
				files["Chart.yaml"] = tc.chartYAML
			}
			vals := map[string]any{}
			if tc.values != "" {
				files["values.schema.json"] = tc.values
				vals["replicas"] = "three"
			}
			chrt, err := loader.Load(writeChart(t, files))
			require.NoError(t, err)
			_, err = Template(chrt, vals, tc.release, "apps", "v1.31.4")
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// chartRepo serves a chart repository: demo 0.1.0, 0.2.0 and 0.3.0-rc.1 (index.yaml with relative URLs,
// as `helm repo index` writes them), and counts the requests.
func chartRepo(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	for _, v := range []string{"0.1.0", "0.2.0", "0.3.0-rc.1"} {
		chrt, err := loader.Load(writeChart(t, demoChart))
		require.NoError(t, err)
		chrt.Metadata.Version = v
		_, err = chartutil.Save(chrt, dir)
		require.NoError(t, err)
	}
	idx, err := repo.IndexDirectory(dir, "")
	require.NoError(t, err)
	require.NoError(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))
	var n atomic.Int64
	files := http.StripPrefix("/charts", http.FileServer(http.Dir(dir)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestFetchChartFromARepository(t *testing.T) {
	t.Parallel()
	srv, _ := chartRepo(t)
	ctx := context.Background()
	for name, tc := range map[string]struct{ version, want string }{
		"an exact version":                {"0.1.0", "0.1.0"},
		"a range":                         {"~0.1", "0.1.0"},
		"no version: the newest stable":   {"", "0.2.0"},
		"a pre-release asked for by name": {"0.3.0-rc.1", "0.3.0-rc.1"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := fetchChart(ctx, chartRef{Repository: srv.URL + "/charts/", Chart: "demo", Version: tc.version}, t.TempDir())
			require.NoError(t, err)
			chrt, err := loader.Load(p)
			require.NoError(t, err)
			require.Equal(t, tc.want, chrt.Metadata.Version)
		})
	}

	t.Run("what cannot be fetched says why", func(t *testing.T) {
		t.Parallel()
		for ref, want := range map[chartRef]string{
			{Repository: srv.URL + "/charts", Chart: "nope"}:                       `chart "nope" not found`,
			{Repository: srv.URL + "/charts", Chart: "demo", Version: "9.9.9"}:     `no version matches "9.9.9"`,
			{Repository: srv.URL + "/elsewhere", Chart: "demo"}:                    "is not a valid chart repository or cannot be reached",
			{Repository: srv.URL + "/charts", Chart: "demo", Version: "not a ver"}: `version "not a ver"`,
		} {
			_, err := fetchChart(ctx, ref, t.TempDir())
			require.ErrorContains(t, err, want, ref)
		}
	})

	t.Run("a chart that does not match the index's digest is refused", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		chrt, err := loader.Load(writeChart(t, demoChart))
		require.NoError(t, err)
		_, err = chartutil.Save(chrt, dir)
		require.NoError(t, err)
		idx, err := repo.IndexDirectory(dir, "")
		require.NoError(t, err)
		require.NoError(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))
		// The archive changes after the index was written: a tampered mirror.
		require.NoError(t, os.WriteFile(filepath.Join(dir, "demo-0.1.0.tgz"), []byte("not the chart"), 0o644))
		tampered := httptest.NewServer(http.FileServer(http.Dir(dir)))
		t.Cleanup(tampered.Close)
		_, err = fetchChart(ctx, chartRef{Repository: tampered.URL, Chart: "demo", Version: "0.1.0"}, t.TempDir())
		require.ErrorContains(t, err, ", the index says ")
	})
}

func TestRendererDownloadsAPinnedChartOnce(t *testing.T) {
	t.Parallel()
	srv, requests := chartRepo(t)
	r := &Renderer{HelmCacheDir: t.TempDir()}
	def := &api.WorkloadDefinition{Meta: api.Meta{Name: "demo"}, Spec: api.WorkloadDefinitionSpec{
		Helm: &api.HelmSource{Repository: srv.URL + "/charts", Chart: "demo", Version: "0.2.0"}}}
	for range 3 {
		objs, err := r.Render(context.Background(), def, instance(nil), "v1.31.4")
		require.NoError(t, err)
		require.Equal(t, "Deployment", objs[len(objs)-1].GetKind())
	}
	require.EqualValues(t, 2, requests.Load(), "index.yaml and the archive, once")
}
