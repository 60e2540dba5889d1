package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunServesUntilCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-kubesim=false", "-account", "123456789012"}, pw)
		pw.Close()
	}()

	line, err := bufio.NewReader(pr).ReadBytes('\n')
	require.NoError(t, err)
	var ready struct {
		Ready   bool   `json:"ready"`
		URL     string `json:"url"`
		Account struct {
			ID          string `json:"id"`
			AccessKeyID string `json:"access_key_id"`
		} `json:"account"`
	}
	require.NoError(t, json.Unmarshal(line, &ready))
	require.True(t, ready.Ready)
	require.Equal(t, "123456789012", ready.Account.ID)
	require.Equal(t, "AKIAAWSSIMDEMO000000", ready.Account.AccessKeyID)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ready.URL+"/_awssim/resources", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `[]`, string(body))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}
