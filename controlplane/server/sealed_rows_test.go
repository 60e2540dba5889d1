package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// markerPlaceholder, in sealBases, stands for the marker of the field it is in; instancePlaceholder for
// the id of a real workload instance.
const (
	markerPlaceholder   = "@MARKER@"
	instancePlaceholder = "@INSTANCE_ID@"
)

// sealBases are valid specs of the kinds with write-only fields. Write-only fields left out are filled
// from their Go type, with the field's marker in every string, map key and list; a field a base sets
// (because it must be well formed) carries markerPlaceholder. A kind with write-only fields and no base
// fails TestWriteOnlyFieldsNeverReachTheDatabase, so that a new one is covered.
var sealBases = map[string]string{
	api.KindKubernetesRuntime: `{"provider":"kubeconfig","kubeconfig":` + jsonString(strings.ReplaceAll(sealKubeconfig, "super-secret-token", markerPlaceholder)) + `}`,
	api.KindCloudAccount:      `{"provider":"aws","region":"us-east-1","access_key_id":"AKIAIOSFODNN7EXAMPLE"}`,
	api.KindSecret:            `{"instance_ids":["` + instancePlaceholder + `"]}`,
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// sealCase is one object to write: its kind, its spec, and the marker of each write-only field.
type sealCase struct {
	ki      *api.KindInfo
	spec    json.RawMessage
	markers map[string]string // by field
}

// sealCases walks the kind registry: one object per kind with write-only fields, a marker in each.
func sealCases(t *testing.T, instanceID string) []sealCase {
	t.Helper()
	var out []sealCase
	for _, ki := range api.Kinds() {
		if len(ki.WriteOnly) == 0 {
			continue
		}
		base, ok := sealBases[ki.Kind]
		require.True(t, ok, "kind %s has write-only fields %v: add a valid spec to sealBases", ki.Kind, ki.WriteOnly)
		var spec map[string]any
		require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(base, instancePlaceholder, instanceID)), &spec))
		c := sealCase{ki: ki, markers: map[string]string{}}
		st := reflect.TypeOf(ki.SpecType)
		for _, name := range ki.WriteOnly {
			marker := newMarker(t)
			c.markers[name] = marker
			if v, set := spec[name]; set {
				s, _ := v.(string)
				require.Contains(t, s, markerPlaceholder, "sealBases[%s].%s", ki.Kind, name)
				spec[name] = strings.ReplaceAll(s, markerPlaceholder, marker)
				continue
			}
			f, ok := jsonFieldType(st, name)
			require.True(t, ok, "%s has no field %s", st, name)
			spec[name] = markerValue(f, marker)
			data, err := json.Marshal(spec[name])
			require.NoError(t, err)
			require.Contains(t, string(data), marker, "%s.%s (%s) holds no string: set it in sealBases", ki.Kind, name, f)
		}
		data, err := json.Marshal(spec)
		require.NoError(t, err)
		c.spec = data
		out = append(out, c)
	}
	require.NotEmpty(t, out)
	return out
}

func newMarker(t *testing.T) string {
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "QLEET_MARK_" + strings.ToUpper(hex.EncodeToString(b))
}

func jsonFieldType(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || tag == "" && f.Name == name {
			return f.Type, true
		}
	}
	return nil, false
}

// markerValue is a value of type t with marker in every string, map key and list it holds.
func markerValue(t reflect.Type, marker string) any {
	switch t.Kind() {
	case reflect.String:
		return marker
	case reflect.Pointer:
		return markerValue(t.Elem(), marker)
	case reflect.Slice, reflect.Array:
		return []any{markerValue(t.Elem(), marker)}
	case reflect.Map:
		return map[string]any{marker: markerValue(t.Elem(), marker)}
	case reflect.Struct:
		m := map[string]any{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" || !f.IsExported() {
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			m[tag] = markerValue(f.Type, marker)
		}
		return m
	}
	return reflect.Zero(t).Interface()
}

// writeSealCases writes every case through the API (create, then an unchanged update), checks that the
// controller role reads each value back and the others do not, and returns the markers written.
func writeSealCases(t *testing.T, e *env, sealed bool) []string {
	t.Helper()
	var markers []string
	_, _, inst := e.world(t, "seal")
	for _, c := range sealCases(t, inst.ID) {
		name := strings.ReplaceAll(c.ki.Kind, "_", "-") + "-sealed"
		code, body := e.raw(t, server.RoleAdmin, http.MethodPost, "/v1/"+c.ki.Plural, `{"name":"`+name+`","spec":`+string(c.spec)+`}`, nil)
		require.Equal(t, http.StatusCreated, code, "%s: %s", c.ki.Kind, body)
		var created api.RawObject
		require.NoError(t, json.Unmarshal(body, &created))
		for _, m := range c.markers {
			require.NotContains(t, string(body), m, "admin does not read %s back", c.ki.Kind)
			markers = append(markers, m)
		}
		code, body = e.raw(t, server.RoleAdmin, http.MethodPut, "/v1/"+c.ki.Plural+"/"+created.ID, `{"name":"`+name+`","spec":`+string(c.spec)+`}`, nil)
		require.Equal(t, http.StatusOK, code, "%s: %s", c.ki.Kind, body)
		var updated api.RawObject
		require.NoError(t, json.Unmarshal(body, &updated))
		if sealed {
			require.Equal(t, created.Generation, updated.Generation, "%s: re-sending unchanged secrets is no spec change", c.ki.Kind)
		}

		code, body = e.raw(t, server.RoleController, http.MethodGet, "/v1/"+c.ki.Plural+"/"+created.ID, "", nil)
		require.Equal(t, http.StatusOK, code, "%s: %s", c.ki.Kind, body)
		var got api.RawObject
		require.NoError(t, json.Unmarshal(body, &got))
		var gotSpec, sent map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(got.Spec, &gotSpec))
		require.NoError(t, json.Unmarshal(c.spec, &sent))
		for field := range c.markers {
			require.JSONEq(t, string(sent[field]), string(gotSpec[field]), "the controller reads %s.%s as written", c.ki.Kind, field)
		}
		code, body = e.raw(t, server.RoleViewer, http.MethodGet, "/v1/"+c.ki.Plural+"/"+created.ID, "", nil)
		require.Equal(t, http.StatusOK, code)
		for _, m := range c.markers {
			require.NotContains(t, string(body), m)
		}
	}
	return markers
}

// sqliteHits counts each marker in the bytes of a SQLite database and its -wal file.
func sqliteHits(t *testing.T, path string, markers []string) map[string]int {
	t.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal"} {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		all = append(all, data...)
	}
	hits := map[string]int{}
	for _, m := range markers {
		hits[m] = bytes.Count(all, []byte(m))
	}
	return hits
}

// postgresHits counts the rows of every table that hold each marker, as PostgreSQL stores them.
func postgresHits(t *testing.T, url string, markers []string) map[string]int {
	t.Helper()
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(url)))
	defer db.Close()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, tables, "objects")
	hits := map[string]int{}
	for _, m := range markers {
		for _, table := range tables {
			var n int
			require.NoError(t, db.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM %q t WHERE t::text LIKE '%%%s%%'`, table, m)).Scan(&n))
			hits[m] += n
		}
	}
	return hits
}

// TestWriteOnlyFieldsNeverReachTheDatabase walks every registered kind's write-only fields, writes a
// marker in each through the API, and greps the raw database for it: the SQLite file and its WAL, and
// every PostgreSQL table. With no key (sealing off) the same walk finds every marker, which shows the
// grep sees what is stored.
func TestWriteOnlyFieldsNeverReachTheDatabase(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	for _, sealed := range []bool{true, false} {
		cfg := func(c *server.Config) {
			if sealed {
				c.SecretKeys = [][]byte{key}
			}
		}
		want := func(t *testing.T, hits map[string]int) {
			require.NotEmpty(t, hits)
			for m, n := range hits {
				if sealed {
					require.Zero(t, n, "marker %s is stored in plain text", m)
				} else {
					require.NotZero(t, n, "with sealing off, marker %s should be found", m)
				}
			}
		}
		t.Run(fmt.Sprintf("sqlite sealed=%v", sealed), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "qleet.db")
			st, err := store.Open(context.Background(), store.Config{URL: path, Logger: quietLogger()})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			e := setup(t, setupOpts{st: st, cfg: cfg})
			markers := writeSealCases(t, e, sealed)
			want(t, sqliteHits(t, path, markers))
		})
		t.Run(fmt.Sprintf("postgres sealed=%v", sealed), func(t *testing.T) {
			t.Parallel()
			url := pgtest.URL(t)
			st, err := store.Open(context.Background(), store.Config{URL: url, Logger: quietLogger()})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			e := setup(t, setupOpts{st: st, cfg: cfg})
			markers := writeSealCases(t, e, sealed)
			want(t, postgresHits(t, url, markers))
		})
	}
}

// TestServerRefusesAKindItCannotSeal registers, in a child process, a kind whose write-only field is
// not in its spec: server.New fails and names it.
func TestServerRefusesAKindItCannotSeal(t *testing.T) {
	t.Parallel()
	if os.Getenv("QLEET_TEST_UNSEALABLE_KIND") == "1" {
		type badSpec struct {
			Token string `json:"token,omitempty"`
		}
		api.RegisterKind(api.KindDef[badSpec, api.Status]{Kind: "unsealable_thing", WriteOnly: []string{"tokn"}})
		_, err := server.New(server.Config{Store: openSQLite(t)})
		require.Error(t, err)
		fmt.Println("server.New:", err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerRefusesAKindItCannotSeal$", "-test.v")
	cmd.Env = append(os.Environ(), "QLEET_TEST_UNSEALABLE_KIND=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), `server.New: server: write-only fields that cannot be sealed at rest: kind unsealable_thing: write-only field "tokn" is not a JSON field`)
}
