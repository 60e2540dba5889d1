package awssim

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// protocol is an AWS wire protocol family; it decides how replies and errors
// are written.
type protocol int

const (
	protoQuery    protocol = iota // STS, IAM, RDS: form in, <XResponse><XResult> out
	protoEC2                      // EC2: form in, <XResponse> out, <Response><Errors> on error
	protoRESTJSON                 // EKS
	protoS3                       // S3: REST-XML, bare <Error>
	protoRoute53                  // Route53: REST-XML, <ErrorResponse>
)

// apiError is an error reply: status code, error code and message.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// reply is a successful answer. body is, per protocol: the members of
// <XResult> (query), of <XResponse> (EC2), a JSON value (REST-JSON), or a
// root element with its XMLName (REST-XML); nil for none.
type reply struct {
	status int
	body   any
	header map[string]string
}

// request is one call on its way through the stand-in.
type request struct {
	r       *http.Request
	body    []byte
	form    url.Values // query protocols: the form; REST: the URL query
	service string
	action  string
	region  string
	cred    *credential
	params  map[string]string
	proto   protocol
	reqID   string
}

// account is the caller's account ID.
func (q *request) account() string { return q.cred.account }

// param records a key parameter of the call in its log entry.
func (q *request) param(k, v string) {
	if v == "" {
		return
	}
	if len(v) > 200 {
		v = v[:200] + "..."
	}
	q.params[k] = v
}

// formList returns the values of a flattened list parameter in index order:
// prefix.1, prefix.2, ... or prefix.<member>.1, ... (any member name).
func formList(form url.Values, prefix string) []string {
	idx := map[int]string{}
	for k, v := range form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok || len(v) == 0 {
			continue
		}
		if _, after, found := strings.Cut(rest, "."); found && !strings.Contains(after, ".") {
			rest = after // prefix.member.N
		}
		if n, err := strconv.Atoi(rest); err == nil {
			idx[n] = v[0]
		}
	}
	out := make([]string, 0, len(idx))
	for i := 1; len(out) < len(idx) && i <= len(idx)+1000; i++ {
		if v, ok := idx[i]; ok {
			out = append(out, v)
		}
	}
	return out
}

// formStructs returns the flattened list of structures under prefix, each as
// a map of its member paths: Tags.member.1.Key -> [{"Key": ...}].
func formStructs(form url.Values, prefix string) []map[string]string {
	idx := map[int]map[string]string{}
	for k, v := range form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok || len(v) == 0 {
			continue
		}
		parts := strings.SplitN(rest, ".", 3)
		var n int
		var err error
		var field string
		if n, err = strconv.Atoi(parts[0]); err == nil && len(parts) >= 2 {
			field = strings.Join(parts[1:], ".")
		} else if len(parts) == 3 {
			if n, err = strconv.Atoi(parts[1]); err != nil {
				continue
			}
			field = parts[2]
		} else {
			continue
		}
		if idx[n] == nil {
			idx[n] = map[string]string{}
		}
		idx[n][field] = v[0]
	}
	out := make([]map[string]string, 0, len(idx))
	for i := 1; len(out) < len(idx) && i <= len(idx)+1000; i++ {
		if m, ok := idx[i]; ok {
			out = append(out, m)
		}
	}
	return out
}

const (
	nsSTS     = "https://sts.amazonaws.com/doc/2011-06-15/"
	nsIAM     = "https://iam.amazonaws.com/doc/2010-05-08/"
	nsRDS     = "http://rds.amazonaws.com/doc/2014-10-31/"
	nsEC2     = "http://ec2.amazonaws.com/doc/2016-11-15/"
	nsRoute53 = "https://route53.amazonaws.com/doc/2013-04-01/"
	nsS3      = "http://s3.amazonaws.com/doc/2006-03-01/"
)

func namespaceOf(service string) string {
	switch service {
	case "sts":
		return nsSTS
	case "iam":
		return nsIAM
	case "rds":
		return nsRDS
	case "ec2":
		return nsEC2
	case "route53":
		return nsRoute53
	}
	return ""
}

func (s *Sim) writeReply(w http.ResponseWriter, q *request, rep *reply) {
	h := w.Header()
	h.Set("X-Amzn-Requestid", q.reqID)
	if q.proto == protoS3 {
		h.Set("X-Amz-Request-Id", q.reqID)
	}
	for k, v := range rep.header {
		h.Set(k, v)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	switch q.proto {
	case protoRESTJSON:
		h.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if rep.body != nil {
			_ = json.NewEncoder(w).Encode(rep.body)
		}
	case protoQuery:
		h.Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		enc := xml.NewEncoder(w)
		root := xml.StartElement{Name: xml.Name{Local: q.action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: namespaceOf(q.service)}}}
		_ = enc.EncodeToken(root)
		if rep.body != nil {
			_ = enc.EncodeElement(rep.body, xml.StartElement{Name: xml.Name{Local: q.action + "Result"}})
		}
		_ = enc.EncodeElement(struct {
			RequestID string `xml:"RequestId"`
		}{q.reqID}, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}})
		_ = enc.EncodeToken(root.End())
		_ = enc.Flush()
	case protoEC2:
		h.Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(status)
		body := rep.body
		if body == nil {
			body = struct {
				Return bool `xml:"return"`
			}{true}
		}
		_ = xml.NewEncoder(w).EncodeElement(body, xml.StartElement{Name: xml.Name{Local: q.action + "Response"},
			Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: nsEC2}}})
	default: // REST-XML
		if raw, ok := rep.body.(rawBody); ok {
			w.WriteHeader(status)
			if q.r.Method != http.MethodHead {
				_, _ = w.Write(raw)
			}
			return
		}
		if rep.body != nil {
			h.Set("Content-Type", "application/xml")
		}
		w.WriteHeader(status)
		if rep.body != nil && q.r.Method != http.MethodHead {
			_, _ = w.Write([]byte(xml.Header))
			_ = xml.NewEncoder(w).Encode(rep.body)
		}
	}
}

func (s *Sim) writeError(w http.ResponseWriter, q *request, e *apiError) {
	h := w.Header()
	h.Set("X-Amzn-Requestid", q.reqID)
	switch q.proto {
	case protoRESTJSON:
		h.Set("Content-Type", "application/json")
		h.Set("X-Amzn-Errortype", e.code)
		w.WriteHeader(e.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": e.msg})
	case protoEC2:
		h.Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(e.status)
		_ = xml.NewEncoder(w).Encode(ec2ErrorResponse{Errors: []xmlError{{Code: e.code, Message: e.msg}}, RequestID: q.reqID})
	case protoS3:
		h.Set("X-Amz-Request-Id", q.reqID)
		h.Set("Content-Type", "application/xml")
		w.WriteHeader(e.status)
		if q.r.Method != http.MethodHead {
			_, _ = w.Write([]byte(xml.Header))
			_ = xml.NewEncoder(w).Encode(s3Error{Code: e.code, Message: e.msg, RequestID: q.reqID})
		}
	default: // query and Route53
		h.Set("Content-Type", "text/xml")
		w.WriteHeader(e.status)
		typ := "Sender"
		if e.status >= 500 {
			typ = "Receiver"
		}
		ns := namespaceOf(q.service)
		if ns == "" {
			ns = nsSTS
		}
		_ = xml.NewEncoder(w).Encode(queryErrorResponse{Xmlns: ns, Error: queryError{Type: typ, Code: e.code, Message: e.msg}, RequestID: q.reqID})
	}
}

type xmlError struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

type ec2ErrorResponse struct {
	XMLName   xml.Name   `xml:"Response"`
	Errors    []xmlError `xml:"Errors>Error"`
	RequestID string     `xml:"RequestID"`
}

type queryError struct {
	Type    string `xml:"Type"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

type queryErrorResponse struct {
	XMLName   xml.Name   `xml:"ErrorResponse"`
	Xmlns     string     `xml:"xmlns,attr"`
	Error     queryError `xml:"Error"`
	RequestID string     `xml:"RequestId"`
}

type s3Error struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	RequestID string   `xml:"RequestId"`
}

// authError names an authentication failure as the protocol does.
func authError(p protocol, f *authFailure) *apiError {
	type codes struct {
		status int
		code   string
	}
	var table map[authKind]codes
	switch p {
	case protoRESTJSON:
		table = map[authKind]codes{
			authMissing: {403, "MissingAuthenticationTokenException"}, authMalformed: {403, "IncompleteSignatureException"},
			authUnknownKey: {403, "UnrecognizedClientException"}, authBadSignature: {403, "InvalidSignatureException"},
			authExpiredSignature: {403, "InvalidSignatureException"}, authExpiredToken: {403, "ExpiredTokenException"},
		}
	case protoEC2:
		table = map[authKind]codes{
			authMissing: {401, "AuthFailure"}, authMalformed: {401, "AuthFailure"}, authUnknownKey: {401, "AuthFailure"},
			authBadSignature: {401, "AuthFailure"}, authExpiredSignature: {400, "RequestExpired"}, authExpiredToken: {400, "RequestExpired"},
		}
	case protoS3:
		table = map[authKind]codes{
			authMissing: {403, "AccessDenied"}, authMalformed: {400, "AuthorizationHeaderMalformed"},
			authUnknownKey: {403, "InvalidAccessKeyId"}, authBadSignature: {403, "SignatureDoesNotMatch"},
			authExpiredSignature: {403, "AccessDenied"}, authExpiredToken: {400, "ExpiredToken"},
		}
	default:
		table = map[authKind]codes{
			authMissing: {403, "MissingAuthenticationToken"}, authMalformed: {400, "IncompleteSignature"},
			authUnknownKey: {403, "InvalidClientTokenId"}, authBadSignature: {403, "SignatureDoesNotMatch"},
			authExpiredSignature: {403, "SignatureDoesNotMatch"}, authExpiredToken: {403, "ExpiredToken"},
		}
	}
	c := table[f.kind]
	msg := f.msg
	if p == protoS3 && f.kind == authUnknownKey {
		msg = "The AWS Access Key Id you provided does not exist in our records."
	}
	return &apiError{status: c.status, code: c.code, msg: msg}
}

// throttleError is the protocol's throttling error, which the SDKs retry.
func throttleError(p protocol) *apiError {
	switch p {
	case protoRESTJSON:
		return errorf(http.StatusTooManyRequests, "ThrottlingException", "Rate exceeded")
	case protoEC2:
		return errorf(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
	case protoS3:
		return errorf(http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	default:
		return errorf(http.StatusBadRequest, "Throttling", "Rate exceeded")
	}
}

// deniedError is the protocol's access-denied error, naming the action.
func deniedError(p protocol, service, action, principal string) *apiError {
	msg := fmt.Sprintf("User: %s is not authorized to perform: %s:%s because no identity-based policy allows the %s:%s action",
		principal, service, action, service, action)
	switch p {
	case protoRESTJSON:
		return &apiError{status: 403, code: "AccessDeniedException", msg: msg}
	case protoEC2:
		return &apiError{status: 403, code: "UnauthorizedOperation", msg: "You are not authorized to perform this operation. " + msg}
	default:
		return &apiError{status: 403, code: "AccessDenied", msg: msg}
	}
}

var patterns sync.Map // pattern -> *regexp.Regexp

// matches reports whether s matches the regular expression pattern,
// compiling each pattern once.
func matches(pattern, s string) bool {
	re, ok := patterns.Load(pattern)
	if !ok {
		re, _ = patterns.LoadOrStore(pattern, regexp.MustCompile(pattern))
	}
	return re.(*regexp.Regexp).MatchString(s)
}
