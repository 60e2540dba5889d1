package awssim

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SigV4 constants.
const (
	sigAlgorithm   = "AWS4-HMAC-SHA256"
	amzDateFormat  = "20060102T150405Z"
	unsignedBody   = "UNSIGNED-PAYLOAD"
	maxClockSkew   = 15 * time.Minute
	maxPresignLife = 7 * 24 * time.Hour
)

// sigInfo is what a request says of its signature: from the Authorization
// header, or from the query string (a presigned URL).
type sigInfo struct {
	accessKey     string
	scopeDate     string // yyyymmdd
	region        string
	service       string
	signedHeaders []string
	signature     string
	amzDate       time.Time
	presigned     bool
	expires       time.Duration // presigned only
}

func (si *sigInfo) scope() string {
	return si.scopeDate + "/" + si.region + "/" + si.service + "/aws4_request"
}

// authKind is a class of authentication failure; each protocol names it its
// own way (see authError).
type authKind int

const (
	authMissing authKind = iota
	authMalformed
	authUnknownKey
	authBadSignature
	authExpiredSignature
	authExpiredToken
)

type authFailure struct {
	kind authKind
	msg  string
}

// parseSig reads the SigV4 parameters of r. It returns nil, nil when the
// request carries no authentication at all.
func parseSig(r *http.Request) (*sigInfo, *authFailure) {
	if h := r.Header.Get("Authorization"); h != "" {
		return parseAuthHeader(h, r.Header.Get("X-Amz-Date"))
	}
	q := r.URL.Query()
	if q.Get("X-Amz-Algorithm") == "" {
		return nil, nil
	}
	return parsePresigned(q)
}

func parseAuthHeader(h, date string) (*sigInfo, *authFailure) {
	alg, rest, _ := strings.Cut(h, " ")
	if alg != sigAlgorithm {
		return nil, &authFailure{authMalformed, fmt.Sprintf("Unsupported authorization type %q; only %s is accepted", alg, sigAlgorithm)}
	}
	si := &sigInfo{}
	var cred string
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			si.signedHeaders = strings.Split(v, ";")
		case "Signature":
			si.signature = v
		}
	}
	if cred == "" || len(si.signedHeaders) == 0 || si.signature == "" {
		return nil, &authFailure{authMalformed, "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters"}
	}
	if f := si.setCredential(cred); f != nil {
		return nil, f
	}
	t, err := time.Parse(amzDateFormat, date)
	if err != nil {
		return nil, &authFailure{authMalformed, "missing or malformed X-Amz-Date header"}
	}
	si.amzDate = t
	return si, nil
}

func parsePresigned(q url.Values) (*sigInfo, *authFailure) {
	if a := q.Get("X-Amz-Algorithm"); a != sigAlgorithm {
		return nil, &authFailure{authMalformed, fmt.Sprintf("X-Amz-Algorithm %q is not supported", a)}
	}
	si := &sigInfo{presigned: true, signature: q.Get("X-Amz-Signature")}
	si.signedHeaders = strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	if si.signature == "" || q.Get("X-Amz-SignedHeaders") == "" {
		return nil, &authFailure{authMalformed, "X-Amz-Signature and X-Amz-SignedHeaders are required"}
	}
	if f := si.setCredential(q.Get("X-Amz-Credential")); f != nil {
		return nil, f
	}
	t, err := time.Parse(amzDateFormat, q.Get("X-Amz-Date"))
	if err != nil {
		return nil, &authFailure{authMalformed, "missing or malformed X-Amz-Date"}
	}
	si.amzDate = t
	exp := q.Get("X-Amz-Expires")
	if exp == "" {
		exp = "900" // as STS takes a presigned URL without one: 15 minutes
	}
	secs, err := strconv.Atoi(exp)
	if err != nil || secs <= 0 || time.Duration(secs)*time.Second > maxPresignLife {
		return nil, &authFailure{authMalformed, "X-Amz-Expires must be a number of seconds from 1 to 604800"}
	}
	si.expires = time.Duration(secs) * time.Second
	return si, nil
}

func (si *sigInfo) setCredential(cred string) *authFailure {
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || parts[0] == "" {
		return &authFailure{authMalformed, fmt.Sprintf("Credential should be scoped to a valid region and service, and end in aws4_request: %q", cred)}
	}
	si.accessKey, si.scopeDate, si.region, si.service = parts[0], parts[1], parts[2], parts[3]
	return nil
}

// verify checks r's signature against the key it names. s3Style turns off
// the second escaping of the path, as S3 signers do.
func (s *Sim) verify(r *http.Request, body []byte, si *sigInfo, s3Style bool) (*credential, *authFailure) {
	s.mu.Lock()
	cred := s.keys[si.accessKey]
	s.mu.Unlock()
	if cred == nil {
		return nil, &authFailure{authUnknownKey, "The security token included in the request is invalid."}
	}
	now := s.now()
	if si.scopeDate != si.amzDate.Format("20060102") {
		return nil, &authFailure{authBadSignature, "Credential scope date does not match X-Amz-Date"}
	}
	if si.presigned {
		if now.After(si.amzDate.Add(si.expires)) {
			return nil, &authFailure{authExpiredSignature, fmt.Sprintf("Request has expired: signed at %s, valid for %s", si.amzDate.Format(amzDateFormat), si.expires)}
		}
	} else if d := now.Sub(si.amzDate); d > maxClockSkew || d < -maxClockSkew {
		return nil, &authFailure{authExpiredSignature, fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 15 min.)",
			si.amzDate.Format(amzDateFormat), now.Add(-maxClockSkew).Format(amzDateFormat), now.Format(amzDateFormat))}
	}
	if cred.SessionToken != "" {
		tok := r.Header.Get("X-Amz-Security-Token")
		if si.presigned {
			tok = r.URL.Query().Get("X-Amz-Security-Token")
		}
		if subtle.ConstantTimeCompare([]byte(tok), []byte(cred.SessionToken)) != 1 {
			return nil, &authFailure{authUnknownKey, "The security token included in the request is invalid."}
		}
		if now.After(cred.expires) {
			return nil, &authFailure{authExpiredToken, "The security token included in the request is expired"}
		}
	}
	payload, f := payloadHash(r, body, si, s3Style)
	if f != nil {
		return nil, f
	}
	creq := canonicalRequest(r, si, payload, s3Style)
	sts := sigAlgorithm + "\n" + si.amzDate.Format(amzDateFormat) + "\n" + si.scope() + "\n" + hexSHA256([]byte(creq))
	key := signingKey(cred.SecretAccessKey, si.scopeDate, si.region, si.service)
	want := hex.EncodeToString(hmacSHA256(key, []byte(sts)))
	if subtle.ConstantTimeCompare([]byte(want), []byte(si.signature)) != 1 {
		return nil, &authFailure{authBadSignature, "The request signature we calculated does not match the signature you provided. " +
			"Check your AWS Secret Access Key and signing method. Consult the service documentation for details.\n\n" +
			"The Canonical String for this request should have been\n'" + creq + "'\n\nThe String-to-Sign should have been\n'" + sts + "'"}
	}
	return cred, nil
}

func payloadHash(r *http.Request, body []byte, si *sigInfo, s3Style bool) (string, *authFailure) {
	sum := hexSHA256(body)
	if si.presigned {
		if s3Style {
			return unsignedBody, nil
		}
		return sum, nil
	}
	h := r.Header.Get("X-Amz-Content-Sha256")
	switch {
	case h == "":
		if s3Style {
			return "", &authFailure{authMalformed, "Missing required header for this request: x-amz-content-sha256"}
		}
		return sum, nil
	case h == unsignedBody || strings.HasPrefix(h, "STREAMING-"):
		return h, nil
	case h != sum:
		return "", &authFailure{authBadSignature, "The provided 'x-amz-content-sha256' header does not match what was computed."}
	}
	return h, nil
}

func canonicalRequest(r *http.Request, si *sigInfo, payload string, s3Style bool) string {
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	if !s3Style {
		path = uriEncode(path, false)
	}
	q := r.URL.Query()
	if si.presigned {
		q.Del("X-Amz-Signature")
	}
	keys := slices.Sorted(maps.Keys(q))
	var qs []string
	for _, k := range keys {
		vs := slices.Clone(q[k])
		slices.Sort(vs)
		for _, v := range vs {
			qs = append(qs, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	var hs strings.Builder
	for _, h := range si.signedHeaders {
		var vals []string
		switch h {
		case "host":
			vals = []string{r.Host}
		default:
			vals = r.Header.Values(h)
			if len(vals) == 0 && h == "content-length" {
				vals = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		hs.WriteString(h + ":" + strings.Join(vals, ",") + "\n")
	}
	return strings.Join([]string{r.Method, path, strings.Join(qs, "&"), hs.String(), strings.Join(si.signedHeaders, ";"), payload}, "\n")
}

// uriEncode is SigV4's URI encoding: every byte but the unreserved ones
// (and '/' unless encodeSlash) as %XX.
func uriEncode(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), []byte(date))
	k = hmacSHA256(k, []byte(region))
	k = hmacSHA256(k, []byte(service))
	return hmacSHA256(k, []byte("aws4_request"))
}

func hmacSHA256(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
