package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
)

// sseEvent is one Server-Sent Event.
type sseEvent struct{ name, data string }

// openWatch opens GET /v1/watch with the role's token and returns its events as they arrive.
func openWatch(t *testing.T, e *env, role string) (int, <-chan sseEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.hs.URL+"/v1/watch", nil)
	require.NoError(t, err)
	if tok := e.tokens[role]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := e.hs.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	ch := make(chan sseEvent, 64)
	if resp.StatusCode != http.StatusOK {
		close(ch)
		return resp.StatusCode, ch
	}
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return resp.StatusCode, ch
}

// watchChange mirrors the data of a "change" event.
type watchChange struct {
	Changed []struct {
		Kind            string `json:"kind"`
		ID              string `json:"id"`
		Name            string `json:"name"`
		ResourceVersion int64  `json:"resource_version"`
	} `json:"changed"`
	Deleted []string `json:"deleted"`
}

// nextChange waits for the next "change" event, failing the test after d.
func nextChange(t *testing.T, ch <-chan sseEvent, d time.Duration) watchChange {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "the stream ended")
			if ev.name != "change" {
				continue
			}
			var c watchChange
			require.NoError(t, json.Unmarshal([]byte(ev.data), &c), ev.data)
			return c
		case <-deadline:
			t.Fatalf("no change event within %s", d)
		}
	}
}

func TestWatchStreamsChanges(t *testing.T) {
	t.Parallel()
	e := setup(t, setupOpts{cfg: func(c *server.Config) { c.WaitPollInterval = 50 * time.Millisecond }})
	ctx := context.Background()

	t.Run("a caller without a token is refused", func(t *testing.T) {
		code, _ := openWatch(t, e, "none")
		require.Equal(t, http.StatusUnauthorized, code)
	})

	code, events := openWatch(t, e, server.RoleViewer)
	require.Equal(t, http.StatusOK, code, "a viewer may watch")
	select {
	case ev := <-events:
		require.Equal(t, "ready", ev.name, "the stream opens with ready, so that the page re-reads what it shows")
	case <-time.After(5 * time.Second):
		t.Fatal("no ready event")
	}

	def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition("watched"))
	require.NoError(t, err)
	t.Run("a create arrives as a change naming the object and its version", func(t *testing.T) {
		c := nextChange(t, events, 5*time.Second)
		require.Len(t, c.Changed, 1)
		require.Equal(t, def.ID, c.Changed[0].ID)
		require.Equal(t, "workload_definition", c.Changed[0].Kind)
		require.Equal(t, "watched", c.Changed[0].Name)
		require.Equal(t, def.ResourceVersion, c.Changed[0].ResourceVersion)
		require.Empty(t, c.Deleted)
	})

	t.Run("a status write arrives too", func(t *testing.T) {
		status := api.WorkloadDefinitionStatus{Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: 1}}
		got, err := e.ctrl.WorkloadDefinitions().UpdateStatus(ctx, def.ID, 0, status)
		require.NoError(t, err)
		c := nextChange(t, events, 5*time.Second)
		require.Len(t, c.Changed, 1)
		require.Equal(t, got.ResourceVersion, c.Changed[0].ResourceVersion)
	})

	t.Run("an object that goes arrives as deleted", func(t *testing.T) {
		require.NoError(t, e.dev.WorkloadDefinitions().Delete(ctx, def.ID, client.DeleteOptions{}))
		code, data := e.raw(t, server.RoleController, http.MethodPost, "/v1/workload_definitions/"+def.ID+"/finalize", "", nil)
		require.Contains(t, []int{http.StatusNoContent, http.StatusNotFound}, code, string(data))
		for {
			if c := nextChange(t, events, 5*time.Second); slices.Contains(c.Deleted, def.ID) {
				require.Empty(t, c.Changed)
				return
			}
		}
	})

	t.Run("CloseWatches ends the open streams, so that a graceful shutdown does not wait for them", func(t *testing.T) {
		e.srv.CloseWatches()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case _, open := <-events:
				if !open {
					return
				}
			case <-deadline:
				t.Fatal("the stream is still open")
			}
		}
	})
}

// TestWebViewIsMounted: the server serves the web view at /ui without a token (the page holds no data;
// it reads the API with the token the user gives it).
func TestWebViewIsMounted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(e.hs.URL + "/ui")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	require.Equal(t, "/ui/", resp.Header.Get("Location"))
	code, body := e.raw(t, "none", http.MethodGet, "/ui/", "", nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(body), "<title>QleetOS</title>")
	code, _ = e.raw(t, "none", http.MethodGet, "/ui/app.js", "", nil)
	require.Equal(t, http.StatusOK, code)
}
