package redact_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/redact"
)

func TestURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"a password goes and the user stays, as url.URL.Redacted",
			"https://admin:s3cret@10.0.0.1:6443", "https://admin:xxxxx@10.0.0.1:6443"},
		{"a user-only userinfo goes whole: it is often a token",
			"https://ghp_token123@github.com/org/repo", "https://xxxxx@github.com/org/repo"},
		{"every URL in a message, whatever its scheme",
			`cannot reach the Kubernetes API at https://u:p@h:1/api (Get "https://u:p@h:1/version": refused); store postgres://qleet:pw@db:5432/q?sslmode=disable`,
			`cannot reach the Kubernetes API at https://u:xxxxx@h:1/api (Get "https://u:xxxxx@h:1/version": refused); store postgres://qleet:xxxxx@db:5432/q?sslmode=disable`},
		{"a password with an '@' in it goes whole, up to the last '@' of the authority",
			"https://u:p@ss@host/x@y", "https://u:xxxxx@host/x@y"},
		{"a password with a ':' in it goes whole", "https://u:a:b@host", "https://u:xxxxx@host"},
		{"an empty password is still marked", "https://u:@host", "https://u:xxxxx@host"},
		{"net/http's own *** is replaced too", `Get "https://u:***@host/": EOF`, `Get "https://u:xxxxx@host/": EOF`},
		{"an '@' in the path, query or fragment is not userinfo",
			"https://host/users/@me?by=a@b#c@d", "https://host/users/@me?by=a@b#c@d"},
		{"an e-mail address is not a URL", "mail ops@example.com about it", "mail ops@example.com about it"},
		{"an image digest is not a URL", "nginx:1.25@sha256:0123abcd", "nginx:1.25@sha256:0123abcd"},
		{"text without a URL is unchanged", "no Ready nodes (3 total)", "no Ready nodes (3 total)"},
		{"already redacted text stays as it is", "https://u:xxxxx@h and https://xxxxx@h", "https://u:xxxxx@h and https://xxxxx@h"},
		{"a quoted URL ends at its quote", `"https://h/a" then "b@c"`, `"https://h/a" then "b@c"`},
		{"JSON-ish text keeps its quotes", `{"server":"https://u:p@h"}`, `{"server":"https://u:xxxxx@h"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, redact.URLs(tc.in))
			require.Equal(t, tc.want, redact.URLs(redact.URLs(tc.in)), "idempotent")
		})
	}
}

func TestURLsAgreesWithURLRedacted(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"https://a:b@h:1/p?q=1", "http://a:b%40c@h", "postgres://user:pa%2Fss@db/x"} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		require.Equal(t, u.Redacted(), redact.URLs(raw))
	}
}

func TestURLTakesAHostWithoutAScheme(t *testing.T) {
	t.Parallel()
	require.Equal(t, "u:xxxxx@10.0.0.1:6443", redact.URL("u:p@10.0.0.1:6443"))
	require.Equal(t, "xxxxx@10.0.0.1:6443/k8s", redact.URL("tok@10.0.0.1:6443/k8s"))
	require.Equal(t, "10.0.0.1:6443/a@b", redact.URL("10.0.0.1:6443/a@b"))
	require.Equal(t, "https://u:xxxxx@h", redact.URL("https://u:p@h"))
	require.Equal(t, "https://h:6443", redact.URL("https://h:6443"))
}
