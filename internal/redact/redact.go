// Package redact removes credentials from text that QleetOS shows: the userinfo of URLs
// (https://user:pass@host, https://token@host) in statuses, conditions, events, logs and errors. Both
// the API server and the controllers use it, so it imports nothing of theirs.
package redact

import (
	"regexp"
	"strings"
)

// Mask stands for a redacted password, or for a whole user-only userinfo, as in url.URL.Redacted.
const Mask = "xxxxx"

// urlUserinfo matches a URL's scheme and userinfo up to its '@'. The userinfo ends at the last '@'
// before the authority ends (at a '/', '?', '#', whitespace or a quote), as net/url parses it.
var urlUserinfo = regexp.MustCompile("\\b([A-Za-z][A-Za-z0-9+.\\-]*://)([^/?#@\\s\"'<>`]*(?:@[^/?#@\\s\"'<>`]*)*)@")

// URLs returns s with the userinfo of every URL in it (scheme://userinfo@host) redacted. Of
// user:password only the password goes, as url.URL.Redacted does; a user-only userinfo goes whole,
// because it is often a token (https://xxxxx@host). Text without such a URL comes back unchanged, and
// redacting twice changes nothing more.
func URLs(s string) string {
	if !strings.Contains(s, "@") || !strings.Contains(s, "://") {
		return s
	}
	return urlUserinfo.ReplaceAllStringFunc(s, func(m string) string {
		i := strings.Index(m, "://") + len("://")
		return m[:i] + mask(m[i:len(m)-1]) + "@"
	})
}

// URL returns one URL with its userinfo redacted, like URLs. It also takes the scheme-less
// [userinfo@]host[:port][/path] that a Kubernetes REST config's Host may hold.
func URL(raw string) string {
	if strings.Contains(raw, "://") {
		return URLs(raw)
	}
	end := strings.IndexAny(raw, "/?#")
	if end < 0 {
		end = len(raw)
	}
	at := strings.LastIndex(raw[:end], "@")
	if at < 0 {
		return raw
	}
	return mask(raw[:at]) + "@" + raw[at+1:]
}

// mask redacts one userinfo (without its '@').
func mask(info string) string {
	if user, _, ok := strings.Cut(info, ":"); ok {
		return user + ":" + Mask
	}
	return Mask
}
