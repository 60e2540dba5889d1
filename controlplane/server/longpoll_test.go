package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// logLines decodes JSON log lines.
func logLines(t *testing.T, mu *sync.Mutex, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		out = append(out, line)
	}
	return out
}

func TestLongPollsEndedByTheCallerAreNotErrors(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	e := setup(t, setupOpts{cfg: func(c *server.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	ctx := context.Background()
	rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("slices"))
	require.NoError(t, err)
	require.NoError(t, e.dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{}))

	t.Run("a wait the caller ends (the provider's WaitGone slices) is logged at debug with 499, never at error", func(t *testing.T) {
		const slices = 5
		for range slices {
			sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			err := e.dev.KubernetesRuntimes().WaitGone(sctx, rt.ID)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, "no controller runs: the runtime stays")
		}
		var waits int
		await.True(t, 5*time.Second, func() bool {
			waits = 0
			for _, l := range logLines(t, &mu, &logs) {
				if l["msg"] == "http request" && l["method"] == http.MethodGet && l["route"] == "/v1/{plural}/{id}" {
					waits++
				}
			}
			return waits == slices
		}, "each cancelled wait is in the access log")
		for _, l := range logLines(t, &mu, &logs) {
			require.NotEqual(t, "ERROR", l["level"], "nothing needs a person: %v", l)
			require.NotEqual(t, "WARN", l["level"], "nothing needs a person: %v", l)
			if l["msg"] == "http request" && l["method"] == http.MethodGet && l["route"] == "/v1/{plural}/{id}" {
				require.Equal(t, "DEBUG", l["level"])
				require.EqualValues(t, 499, l["status"], "the caller went away: nginx's client closed request")
			}
		}
	})

	t.Run("a wait the server times out answers 200 with the object", func(t *testing.T) {
		code, body := e.raw(t, server.RoleViewer, http.MethodGet, "/v1/kubernetes_runtimes/"+rt.ID+"?wait=gone&timeout=100ms", "", nil)
		require.Equal(t, http.StatusOK, code, string(body))
		var got api.KubernetesRuntime
		require.NoError(t, json.Unmarshal(body, &got))
		require.Equal(t, rt.ID, got.ID)
		require.NotNil(t, got.DeletionRequestedAt)
	})

	t.Run("at the default level an operator sees no request that went well", func(t *testing.T) {
		var quiet bytes.Buffer
		var qmu sync.Mutex
		q := setup(t, setupOpts{cfg: func(c *server.Config) {
			c.Logger = slog.New(slog.NewJSONHandler(&lockedWriter{w: &quiet, mu: &qmu}, nil))
		}})
		_, err := q.dev.KubernetesRuntimes().Create(ctx, localRuntime("quiet"))
		require.NoError(t, err)
		_, err = q.viewer.KubernetesRuntimes().GetByName(ctx, "quiet")
		require.NoError(t, err)
		_, err = q.viewer.KubernetesRuntimes().GetByName(ctx, "missing")
		require.True(t, api.IsNotFound(err))
		require.Empty(t, logLines(t, &qmu, &quiet))
	})
}
