package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

func testKey(t *testing.T) []byte {
	t.Helper()
	k, err := NewSecretKey()
	require.NoError(t, err)
	return k
}

// sealV1 is how releases before v2 sealed a string field, kept here to make legacy rows.
func sealV1(t *testing.T, key []byte, field, plain string) string {
	t.Helper()
	k, err := newSealKey(key)
	require.NoError(t, err)
	m := hmac.New(sha256.New, k.macKey)
	m.Write([]byte(field + "\x00" + plain))
	nonce := m.Sum(nil)[:k.aead.NonceSize()]
	ct := k.aead.Seal(nil, nonce, []byte(plain), []byte(field))
	return sealPrefixV1 + base64.StdEncoding.EncodeToString(append(nonce, ct...))
}

func TestSealerRoundTripsAnyJSONValue(t *testing.T) {
	t.Parallel()
	s, err := newSealer(testKey(t))
	require.NoError(t, err)
	for _, v := range []string{`"a string"`, `{"A":"1","B":"two"}`, `["x","y"]`, `{"n":{"deep":["z",1.5e300,12345678901234567890]}}`, `true`} {
		sealed := s.seal("k.spec.f", []byte(v))
		require.Regexp(t, `^enc:v2:[0-9a-f]{8}:`, sealed)
		require.NotContains(t, sealed, "string")
		got, err := s.open("k.spec.f", sealed)
		require.NoError(t, err)
		require.JSONEq(t, v, string(got))
		require.Equal(t, sealed, s.seal("k.spec.f", []byte(v)), "same field and value, same bytes")
		require.NotEqual(t, sealed, s.seal("k.spec.g", []byte(v)), "the field is part of the nonce")
		_, err = s.open("k.spec.g", sealed)
		require.Error(t, err, "a value moved to another field does not open")
	}
}

// rawStore opens a SQLite store with no sealing, to write rows as older releases did.
func rawStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{URL: filepath.Join(t.TempDir(), "q.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestSealedStoreReadsLegacyRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := rawStore(t)
	key := testKey(t)
	plainMap, err := st.Create(ctx, &store.CreateParams{Kind: api.KindSecret, Name: "plain",
		Spec: json.RawMessage(`{"instance_ids":["i"],"values":{"K":"plain-map"}}`)})
	require.NoError(t, err)
	v1, err := st.Create(ctx, &store.CreateParams{Kind: api.KindCloudAccount, Name: "v1",
		Spec: json.RawMessage(`{"provider":"aws","region":"us-east-1","access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"` +
			sealV1(t, key, api.KindCloudAccount+".spec.secret_access_key", "v1-secret") + `"}`)})
	require.NoError(t, err)

	sl, err := newSealer(testKey(t), key) // the v1 key is no longer the first
	require.NoError(t, err)
	ss := &sealedStore{Store: st, s: sl}
	got, err := ss.Get(ctx, api.KindSecret, plainMap.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"instance_ids":["i"],"values":{"K":"plain-map"}}`, string(got.Spec))
	got, err = ss.Get(ctx, api.KindCloudAccount, v1.ID)
	require.NoError(t, err)
	var ca api.CloudAccountSpec
	require.NoError(t, json.Unmarshal(got.Spec, &ca))
	require.Equal(t, "v1-secret", ca.SecretAccessKey)

	other, err := newSealer(testKey(t))
	require.NoError(t, err)
	_, err = (&sealedStore{Store: st, s: other}).Get(ctx, api.KindCloudAccount, v1.ID)
	require.ErrorContains(t, err, "no key of the ring opens it")
}

func TestSealedStoreRefusesValuesThatLookSealed(t *testing.T) {
	t.Parallel()
	sl, err := newSealer(testKey(t))
	require.NoError(t, err)
	ss := &sealedStore{Store: rawStore(t), s: sl}
	_, err = ss.Create(context.Background(), &store.CreateParams{Kind: api.KindKubernetesRuntime, Name: "r",
		Spec: json.RawMessage(`{"provider":"kubeconfig","kubeconfig":"enc:v2:00000000:AAAA"}`)})
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "spec.kubeconfig", ae.Field)
}

func TestCheckSealable(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkSealable(api.Kinds()), "every registered kind")

	type spec struct {
		Token  string            `json:"token,omitempty"`
		Values map[string]string `json:"values,omitempty"`
		Nested struct {
			List []string `json:"list"`
		} `json:"nested"`
		Hidden string     `json:"-"`
		Func   func()     `json:"func,omitempty"`
		Odd    complex128 `json:"odd,omitempty"`
	}
	kind := func(writeOnly ...string) []*api.KindInfo {
		return []*api.KindInfo{{Kind: "thing", SpecType: spec{}, WriteOnly: writeOnly}}
	}
	require.NoError(t, checkSealable(kind("token", "values", "nested")))
	for _, tc := range []struct {
		name string
		kind []*api.KindInfo
		want string
	}{
		{"not a field", kind("tokn"), `kind thing: write-only field "tokn" is not a JSON field of server.spec`},
		{"skipped by encoding/json", kind("Hidden"), `write-only field "Hidden" is not a JSON field`},
		{"a path", kind("nested.list"), `write-only field "nested.list": must be the JSON name of a top-level spec field`},
		{"empty", kind(""), `write-only field "": must be the JSON name`},
		{"twice", kind("token", "token"), `write-only field "token" is declared twice`},
		{"a func", kind("func"), `write-only field "func": type func() does not encode to JSON`},
		{"complex", kind("odd"), `type complex128 does not encode to JSON`},
		{"not a struct", []*api.KindInfo{{Kind: "thing", SpecType: "x", WriteOnly: []string{"token"}}}, "need a struct spec type, not string"},
		{"no spec type", []*api.KindInfo{{Kind: "thing", WriteOnly: []string{"token"}}}, "need a struct spec type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSealable(tc.kind)
			require.ErrorContains(t, err, "write-only fields that cannot be sealed at rest")
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParseSecretKeys(t *testing.T) {
	t.Parallel()
	a, b := testKey(t), testKey(t)
	keys, err := ParseSecretKeys(FormatSecretKeys([][]byte{a, b}))
	require.NoError(t, err)
	require.Equal(t, [][]byte{a, b}, keys)
	keys, err = ParseSecretKeys([]byte(base64.StdEncoding.EncodeToString(a) + "\n"))
	require.NoError(t, err, "the one-key file of older releases")
	require.Equal(t, [][]byte{a}, keys)
	_, err = ParseSecretKeys([]byte("# nothing\n\n"))
	require.ErrorContains(t, err, "no key")
	_, err = ParseSecretKeys([]byte(base64.StdEncoding.EncodeToString(a) + "\nc2hvcnQ=\n"))
	require.ErrorContains(t, err, "line 2: want a 32-byte key")
}

// TestResealMovesEveryRowToTheNewKey writes rows in every format an older server left (plain text, v1,
// v2 with the old key), rotates, and reads them back: with the ring, and after the re-seal with the new
// key alone.
func TestResealMovesEveryRowToTheNewKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := rawStore(t)
	oldKey, newKey := testKey(t), testKey(t)
	oldSealer, err := newSealer(oldKey)
	require.NoError(t, err)
	old := &sealedStore{Store: st, s: oldSealer}

	sec, err := old.Create(ctx, &store.CreateParams{Kind: api.KindSecret, Name: "sealed-map",
		Spec: json.RawMessage(`{"instance_ids":["i"],"values":{"K":"map-secret"}}`)})
	require.NoError(t, err)
	plain, err := st.Create(ctx, &store.CreateParams{Kind: api.KindSecret, Name: "plain-map",
		Spec: json.RawMessage(`{"instance_ids":["i"],"values":{"K":"plain-secret"}}`)})
	require.NoError(t, err)
	v1, err := st.Create(ctx, &store.CreateParams{Kind: api.KindCloudAccount, Name: "v1",
		Spec: json.RawMessage(`{"provider":"aws","region":"us-east-1","access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"` +
			sealV1(t, oldKey, api.KindCloudAccount+".spec.secret_access_key", "v1-secret") + `"}`)})
	require.NoError(t, err)
	empty, err := st.Create(ctx, &store.CreateParams{Kind: api.KindCloudAccount, Name: "role-only",
		Spec: json.RawMessage(`{"provider":"aws","region":"us-east-1","role_arn":"arn:aws:iam::123456789012:role/x"}`)})
	require.NoError(t, err)

	want := map[string]string{sec.ID: "map-secret", plain.ID: "plain-secret", v1.ID: "v1-secret"}
	readAll := func(ss *sealedStore) {
		t.Helper()
		for id, secret := range want {
			o, err := ss.Get(ctx, api.KindSecret, id)
			if err != nil {
				o, err = ss.Get(ctx, api.KindCloudAccount, id)
			}
			require.NoError(t, err, id)
			require.Contains(t, string(o.Spec), secret)
		}
	}

	ring := [][]byte{newKey, oldKey}
	ringSealer, err := newSealer(ring...)
	require.NoError(t, err)
	readAll(&sealedStore{Store: st, s: ringSealer}) // before the re-seal, the ring reads every old row

	stats, err := Reseal(ctx, st, ring)
	require.NoError(t, err)
	require.Equal(t, ResealStats{Resealed: 3, Current: 1}, stats)
	newID := SecretKeyID(newKey)
	for id := range want {
		o, err := st.Get(ctx, api.KindSecret, id)
		if err != nil {
			o, err = st.Get(ctx, api.KindCloudAccount, id)
		}
		require.NoError(t, err)
		require.Contains(t, string(o.Spec), sealPrefix+newID+":")
		require.NotContains(t, string(o.Spec), want[id])
		require.Equal(t, int64(2), o.Generation, "the ciphertext changed, so the generation rose once")
	}
	o, err := st.Get(ctx, api.KindCloudAccount, empty.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), o.Generation, "nothing to reseal, nothing written")

	again, err := Reseal(ctx, st, ring)
	require.NoError(t, err)
	require.Equal(t, ResealStats{Current: 4}, again, "a second run has nothing to do")

	newOnly, err := newSealer(newKey)
	require.NoError(t, err)
	readAll(&sealedStore{Store: st, s: newOnly}) // the old key can go

	_, err = old.Get(ctx, api.KindSecret, sec.ID)
	require.ErrorContains(t, err, "sealed with key "+newID+", which is not in the key ring")
}
