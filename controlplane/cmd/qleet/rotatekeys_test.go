package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

// startAPI starts the API half of the control plane on dataDir and returns it with a controller-role
// client (the role that reads write-only fields).
func startAPI(t *testing.T, dataDir string) (*app.App, *client.Client, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := app.Start(ctx, app.Config{DataDir: dataDir, Listen: "127.0.0.1:0", API: true, Logger: cptest.Logger()})
	require.NoError(t, err)
	admin, err := a.Client()
	require.NoError(t, err)
	tok, err := os.ReadFile(filepath.Join(dataDir, "controller.token"))
	require.NoError(t, err)
	ctrl, err := client.New(a.Endpoint, client.WithToken(strings.TrimSpace(string(tok))))
	require.NoError(t, err)
	return a, admin, ctrl
}

func stopAPI(a *app.App) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.Close(ctx)
}

// TestDataDirIsPrivate starts the control plane on a data dir and database an older release made 0755 and
// 0644, and checks that the dir, the NATS store and every file it holds are the owner's alone.
func TestDataDirIsPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "qleet.db"), nil, 0o644)) // as older releases left it
	a, admin, _ := startAPI(t, dir)
	defer stopAPI(a)
	_, err := admin.Secrets().Create(context.Background(), &api.Secret{Meta: api.Meta{Name: "s"},
		Spec: api.SecretSpec{InstanceIDs: []string{"wi-x"}, Values: map[string]string{"K": "v"}}})
	require.NoError(t, err)

	for name, want := range map[string]fs.FileMode{
		".": 0o700, "nats": 0o700,
		"qleet.db": 0o600, "qleet.db-wal": 0o600, "qleet.db-shm": 0o600,
		"admin.token": 0o600, "controller.token": 0o600, "secret.key": 0o600,
	} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		require.Equal(t, want, fi.Mode().Perm(), "%s is %v", name, fi.Mode().Perm())
	}
	// Whatever else is in it (the JetStream store), nobody but the owner may read it.
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		require.Zero(t, fi.Mode().Perm()&0o007, "%s is %v", p, fi.Mode().Perm())
		return nil
	}))
}

// TestRotateKeys writes secrets, rotates the key with `qleet server rotate-keys`, and reads the old rows
// back: with the ring, then with the new key alone once --retire has dropped the old one.
func TestRotateKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, admin, _ := startAPI(t, dir)
	sec, err := admin.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: "s"},
		Spec: api.SecretSpec{InstanceIDs: []string{"wi-x"}, Values: map[string]string{"PASSWORD": "hunter2"}}})
	require.NoError(t, err)
	acct, err := admin.CloudAccounts().Create(ctx, &api.CloudAccount{Meta: api.Meta{Name: "aws"},
		Spec: api.CloudAccountSpec{Provider: api.CloudAWS, Region: "us-east-1", AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI"}})
	require.NoError(t, err)
	stopAPI(a)
	keyFile := filepath.Join(dir, "secret.key")
	oldKeys, err := os.ReadFile(keyFile)
	require.NoError(t, err)

	readBack := func(t *testing.T) {
		t.Helper()
		a, _, ctrl := startAPI(t, dir)
		defer stopAPI(a)
		s, err := ctrl.Secrets().Get(ctx, sec.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"PASSWORD": "hunter2"}, s.Spec.Values)
		c, err := ctrl.CloudAccounts().Get(ctx, acct.ID)
		require.NoError(t, err)
		require.Equal(t, "wJalrXUtnFEMI", c.Spec.SecretAccessKey)
	}
	rotate := func(t *testing.T, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"server", "rotate-keys", "--data-dir", dir}, args...), func(string) string { return "" }, &stdout, &stderr)
		require.Zero(t, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
		return stdout.String()
	}

	out := rotate(t)
	require.Contains(t, out, "resealed 2 objects")
	keys := readKeys(t, keyFile)
	require.Len(t, keys, 2)
	require.Equal(t, oldKeys, []byte(base64Line(keys[1])), "the old key stays, after the new one")
	readBack(t)

	// The old key alone no longer opens anything: every row moved to the new key.
	require.NoError(t, os.WriteFile(keyFile, oldKeys, 0o600))
	a, _, ctrl := startAPI(t, dir)
	_, err = ctrl.Secrets().Get(ctx, sec.ID)
	require.Error(t, err, "the value is sealed with a key the server lacks")
	require.False(t, api.IsNotFound(err))
	stopAPI(a)
	require.NoError(t, os.WriteFile(keyFile, server.FormatSecretKeys(keys), 0o600))

	out = rotate(t, "--reseal-only", "--retire")
	require.Contains(t, out, "resealed 0 objects")
	require.Contains(t, out, "retired 1 older keys")
	require.Equal(t, keys[:1], readKeys(t, keyFile))
	fi, err := os.Stat(keyFile)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
	readBack(t)
}

func readKeys(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	keys, err := server.ParseSecretKeys(data)
	require.NoError(t, err)
	return keys
}

func base64Line(key []byte) string {
	return string(server.FormatSecretKeys([][]byte{key}))
}
