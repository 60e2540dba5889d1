package awssim

import (
	"net/http"
	"net/url"
	"strings"
)

// handler answers one routed, authenticated call. It runs with s.mu held.
type handler func(q *request) (*reply, *apiError)

// service is one AWS service: its protocol and its router, which names the
// action of a request and picks its handler.
type service struct {
	proto protocol
	route func(q *request) (string, handler, *apiError)
}

func (s *Sim) services() map[string]service {
	return map[string]service{
		"sts":     {protoQuery, s.routeQuery(s.stsActions())},
		"iam":     {protoQuery, s.routeQuery(s.iamActions())},
		"rds":     {protoQuery, s.routeQuery(s.rdsActions())},
		"ec2":     {protoEC2, s.routeQuery(s.ec2Actions())},
		"eks":     {protoRESTJSON, s.routeEKS},
		"s3":      {protoS3, s.routeS3},
		"route53": {protoRoute53, s.routeRoute53},
	}
}

// routeQuery routes a query-protocol request by its Action parameter.
func (s *Sim) routeQuery(actions map[string]handler) func(q *request) (string, handler, *apiError) {
	return func(q *request) (string, handler, *apiError) {
		a := q.form.Get("Action")
		if a == "" {
			return "Unknown", nil, errorf(http.StatusBadRequest, "MissingAction", "The request must contain the parameter Action")
		}
		h := actions[a]
		if h == nil {
			return a, nil, errorf(http.StatusBadRequest, "InvalidAction", "Could not find operation %s for version %s", a, q.form.Get("Version"))
		}
		return a, h, nil
	}
}

// secretParam reports whether a query parameter stays out of the call log:
// passwords, secrets, tokens, policy documents and the signature itself.
func secretParam(k string) bool {
	return strings.HasPrefix(k, "X-Amz-") || k == "Policy" || strings.HasSuffix(k, "PolicyDocument") ||
		strings.Contains(k, "Password") || strings.Contains(k, "Secret") || strings.Contains(k, "Token")
}

func (s *Sim) serveAWS(w http.ResponseWriter, r *http.Request, body []byte) {
	q := &request{r: r, body: body, params: map[string]string{}, reqID: newRequestID(), proto: protoQuery}
	call := Call{Time: s.now()}
	fail := func(e *apiError) {
		call.Service, call.Action, call.Region, call.Params = q.service, q.action, q.region, q.params
		call.Status, call.Error = e.status, e.code
		s.record(call)
		s.writeError(w, q, e)
	}
	si, f := parseSig(r)
	if si == nil && f == nil {
		f = &authFailure{authMissing, "Request is missing Authentication Token"}
	}
	if f != nil {
		q.service, q.action = "unknown", "Unknown"
		if r.Header.Get("X-Amz-Content-Sha256") != "" || r.URL.Query().Has("list-type") {
			q.proto = protoS3
		}
		fail(authError(q.proto, f))
		return
	}
	q.service, q.region = si.service, si.region
	call.AccessKeyID = si.accessKey
	svc, ok := s.services()[si.service]
	if !ok {
		q.action = "Unknown"
		fail(errorf(http.StatusBadRequest, "UnknownService", "The stand-in does not serve the service %q named in the credential scope", si.service))
		return
	}
	q.proto = svc.proto
	q.form = r.URL.Query()
	if svc.proto == protoQuery || svc.proto == protoEC2 {
		if r.Method == http.MethodPost {
			form, err := url.ParseQuery(string(body))
			if err != nil {
				fail(errorf(http.StatusBadRequest, "MalformedQueryString", "form body: %v", err))
				return
			}
			for k, v := range r.URL.Query() {
				form[k] = append(form[k], v...)
			}
			q.form = form
		}
		for k, v := range q.form {
			if k != "Action" && k != "Version" && len(v) > 0 && !secretParam(k) {
				q.param(k, v[0])
			}
		}
	}
	action, h, rerr := svc.route(q)
	q.action = action
	cred, af := s.verify(r, body, si, svc.proto == protoS3)
	if af != nil {
		fail(authError(q.proto, af))
		return
	}
	q.cred = cred
	call.Account, call.Principal = cred.account, cred.ARN
	if e := s.faultFor(q); e != nil {
		fail(e)
		return
	}
	if rerr != nil {
		fail(rerr)
		return
	}
	rep, e := s.handle(h, q)
	if e != nil {
		fail(e)
		return
	}
	call.Service, call.Action, call.Region, call.Params = q.service, q.action, q.region, q.params
	call.Status = rep.status
	if call.Status == 0 {
		call.Status = http.StatusOK
	}
	s.record(call)
	s.writeReply(w, q, rep)
}

// handle runs a handler with the lock held, after moving lifecycles along.
func (s *Sim) handle(h handler, q *request) (*reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked()
	return h(q)
}

func newRequestID() string {
	h := randomString(32, lowerHex)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
