package app_test

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// TestNoCredentialOfAKubeconfigURLIsShown: a kubeconfig whose server URL carries credentials
// (https://user:pass@host, or a token as the user) works, and neither its password nor its token
// appears in any status, condition or event that viewers read, nor in any log line, even with
// client-go logging every request's URL (klog -v=6). Not parallel: klog's verbosity is global.
func TestNoCredentialOfAKubeconfigURLIsShown(t *testing.T) {
	var klogFlags flag.FlagSet
	klog.InitFlags(&klogFlags)
	require.NoError(t, klogFlags.Set("v", "6"))
	t.Cleanup(func() { _ = klogFlags.Set("v", "0") })
	const pass, token = "kc-pass-5e1f", "kc-token-9a7b"
	cluster := kubesimtest.Start(t, kubesimtest.WithName("redact"))
	kc := cptest.Kubeconfig(t, cluster.Kubeconfig)
	server := regexp.MustCompile(`server: https://([^\s]+)`)
	hostPort := server.FindStringSubmatch(kc)
	require.NotNil(t, hostPort, "the kubeconfig has a server")
	withPassword := server.ReplaceAllString(kc, "server: https://admin:"+pass+"@$1")
	unreachable := server.ReplaceAllString(kc, "server: https://"+token+"@127.0.0.1:1")

	logs := &lockedBuffer{}
	logger := slog.New(telemetry.LogHandler(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	_, admin := cptest.Start(t, app.Config{Logger: logger})
	ctx := context.Background()
	rts := admin.KubernetesRuntimes()

	ok, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "with-password"}, Spec: runtimeSpec(withPassword)})
	require.NoError(t, err)
	away, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "token-unreachable"}, Spec: runtimeSpec(unreachable)})
	require.NoError(t, err)

	t.Run("the runtime connects, and its endpoint shows the user but not the password", func(t *testing.T) {
		got, err := rts.WaitReconciled(cptest.Wait(t, time.Minute), ok.ID)
		require.NoError(t, err)
		require.Equal(t, api.PhaseReady, got.Status.Phase, got.Status.Message)
		require.Equal(t, "https://admin:xxxxx@"+hostPort[1], got.Status.Endpoint)
		require.Contains(t, conditionMessage(got.Status.Conditions, "Connected"), "at https://admin:xxxxx@"+hostPort[1])
	})
	t.Run("the unreachable runtime says where it cannot reach, without the token", func(t *testing.T) {
		var got *api.KubernetesRuntime
		await.True(t, time.Minute, func() bool {
			got, err = rts.Get(ctx, away.ID)
			require.NoError(t, err)
			return strings.Contains(got.Status.Message, "127.0.0.1:1")
		}, "condition")
		require.Contains(t, got.Status.Message, "https://xxxxx@127.0.0.1:1")
		require.Equal(t, "https://xxxxx@127.0.0.1:1", got.Status.Endpoint)
	})

	for _, id := range []string{ok.ID, away.ID} {
		obj, err := rts.Get(ctx, id)
		require.NoError(t, err)
		t.Run(obj.Name+": no status, condition or event holds the credentials", func(t *testing.T) {
			shown, err := json.Marshal(obj)
			require.NoError(t, err)
			evs, err := rts.Events(ctx, id)
			require.NoError(t, err)
			require.NotEmpty(t, evs)
			events, err := json.Marshal(evs)
			require.NoError(t, err)
			for _, secret := range []string{pass, token} {
				require.NotContains(t, string(shown), secret)
				require.NotContains(t, string(events), secret)
			}
		})
	}
	t.Run("no log line holds the credentials", func(t *testing.T) {
		require.Contains(t, logs.String(), "https://admin:xxxxx@"+hostPort[1]+"/", "client-go logged its requests")
		require.Contains(t, logs.String(), "https://xxxxx@127.0.0.1:1/")
		require.NotContains(t, logs.String(), pass)
		require.NotContains(t, logs.String(), token)
	})
}

func conditionMessage(conds []api.Condition, typ string) string {
	for _, c := range conds {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}
