package ui_test

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/ui"
)

// served is a response of the handler.
type served struct {
	code   int
	header http.Header
	body   []byte
}

func serve(t *testing.T, path string) served {
	t.Helper()
	rec := httptest.NewRecorder()
	ui.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return served{code: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func TestHandlerServesTheEmbeddedPage(t *testing.T) {
	t.Parallel()

	t.Run("/ui redirects to /ui/", func(t *testing.T) {
		resp := serve(t, "/ui")
		require.Equal(t, http.StatusMovedPermanently, resp.code)
		require.Equal(t, "/ui/", resp.header.Get("Location"))
	})

	t.Run("/ui/ is the page, with a policy that loads nothing from elsewhere", func(t *testing.T) {
		resp := serve(t, "/ui/")
		require.Equal(t, http.StatusOK, resp.code)
		require.Contains(t, resp.header.Get("Content-Type"), "text/html")
		require.Contains(t, resp.header.Get("Content-Security-Policy"), "default-src 'self'")
		require.Contains(t, resp.header.Get("Content-Security-Policy"), "script-src 'self'")
		require.Contains(t, string(resp.body), `<script src="app.js"></script>`)
	})

	t.Run("the script and the style sheet are served", func(t *testing.T) {
		for path, typ := range map[string]string{"/ui/app.js": "javascript", "/ui/style.css": "text/css"} {
			resp := serve(t, path)
			require.Equal(t, http.StatusOK, resp.code, path)
			require.Contains(t, resp.header.Get("Content-Type"), typ, path)
		}
	})

	t.Run("kinds.json maps every kind to its collection", func(t *testing.T) {
		resp := serve(t, "/ui/kinds.json")
		require.Equal(t, http.StatusOK, resp.code)
		var got []struct{ Kind, Plural string }
		require.NoError(t, json.Unmarshal(resp.body, &got))
		want := map[string]string{}
		for _, ki := range api.Kinds() {
			want[ki.Kind] = ki.Plural
		}
		have := map[string]string{}
		for _, k := range got {
			have[k.Kind] = k.Plural
		}
		require.Equal(t, want, have)
	})

	t.Run("an unknown asset is 404", func(t *testing.T) {
		require.Equal(t, http.StatusNotFound, serve(t, "/ui/nothing.js").code)
	})
}

// TestAssetsWorkOffline: no asset names a URL outside the server (a CDN, a web font), except the SVG
// namespace, which is an identifier and never fetched.
func TestAssetsWorkOffline(t *testing.T) {
	t.Parallel()
	url := regexp.MustCompile(`(https?:)?//[a-zA-Z0-9.-]+\.[a-z]{2,}`)
	n := 0
	err := fs.WalkDir(os.DirFS("assets"), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		data, err := os.ReadFile("assets/" + path)
		if err != nil {
			return err
		}
		for _, m := range url.FindAllString(string(data), -1) {
			if !strings.HasPrefix(m, "http://www.w3.org") {
				t.Errorf("%s names %s", path, m)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, n, "index.html, app.js, style.css")
}
