// Package ui is the QleetOS web view served at /ui: the estate as a dependency graph coloured by phase
// (fitted to the window, with wheel zoom and drag pan, its edges routed around the boxes), a page per
// object (spec, status, conditions, events, applied objects, replicas), a plan's preview on the graph,
// and live updates from GET /v1/watch. It is hand-written HTML, CSS and JavaScript embedded in the
// binary: no build step, no CDN, so it works offline. It signs in with an API bearer token, which the
// browser keeps in sessionStorage and sends as the Authorization header, never in a URL.
package ui

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/api"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the web view is served under.
const Prefix = "/ui"

// kindEntry is one entry of /ui/kinds.json: how the page turns a graph node's kind into its API
// collection.
type kindEntry struct {
	Kind   string `json:"kind"`
	Plural string `json:"plural"`
}

// Handler serves the web view under Prefix: /ui redirects to /ui/, /ui/kinds.json lists the kinds, and
// every other path is an embedded asset. It needs no authentication: the assets hold no data, and the
// page reads everything through the API with the token it is given.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	var kinds []kindEntry
	for _, ki := range api.Kinds() {
		kinds = append(kinds, kindEntry{Kind: ki.Kind, Plural: ki.Plural})
	}
	kindsJSON, err := json.Marshal(kinds)
	if err != nil {
		panic(err) // plain strings always marshal
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		switch p := strings.TrimPrefix(r.URL.Path, Prefix); p {
		case "":
			http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
		case "/kinds.json":
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(kindsJSON)
		default:
			files.ServeHTTP(w, r)
		}
	})
}
