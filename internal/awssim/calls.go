package awssim

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Call is one request the stand-in answered, as recorded in the call log.
type Call struct {
	// Time is when the request arrived.
	Time time.Time `json:"time"`
	// Service is the SigV4 service name: sts, iam, ec2, eks, rds, s3 or route53.
	Service string `json:"service"`
	// Action is the operation name, e.g. CreateCluster or HeadBucket.
	Action string `json:"action"`
	// Region is the region of the signature's credential scope.
	Region string `json:"region,omitempty"`
	// Account is the caller's account ID; empty if authentication failed
	// before the key was known.
	Account string `json:"account,omitempty"`
	// Principal is the caller's ARN (for an assumed role, the
	// arn:aws:sts::...:assumed-role/... session ARN).
	Principal string `json:"principal,omitempty"`
	// AccessKeyID is the key the request was signed with.
	AccessKeyID string `json:"access_key_id,omitempty"`
	// Params are the call's key parameters: resource names and IDs, not
	// policy documents or secrets.
	Params map[string]string `json:"params,omitempty"`
	// Status is the HTTP status of the answer.
	Status int `json:"status"`
	// Error is the error code of the answer, e.g. ThrottlingException; empty
	// on success.
	Error string `json:"error,omitempty"`
}

// Calls returns a copy of the call log, oldest first.
func (s *Sim) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.calls)) // never nil: the HTTP route answers []
	for i, c := range s.calls {
		c.Params = maps.Clone(c.Params)
		out[i] = c
	}
	return out
}

// CountByService counts calls per service, e.g. {"eks": 12, "iam": 9}.
func CountByService(calls []Call) map[string]int {
	out := map[string]int{}
	for _, c := range calls {
		out[c.Service]++
	}
	return out
}

// Filter returns the calls of one service ("" for all) and action ("" for
// all), oldest first.
func Filter(calls []Call, service, action string) []Call {
	var out []Call
	for _, c := range calls {
		if (service == "" || c.Service == service) && (action == "" || c.Action == action) {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls empties the call log.
func (s *Sim) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

func (s *Sim) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

// Fault is an injected failure. Service and Action select the calls (Action
// "" or "*" matches every action of the service); Account, if set, limits it
// to one caller account.
type Fault struct {
	// Service is the SigV4 service name, e.g. "eks".
	Service string `json:"service"`
	// Action is the operation name, e.g. "CreateCluster"; "" or "*" for all.
	Action string `json:"action,omitempty"`
	// Account limits the fault to callers of one account; "" for all.
	Account string `json:"account,omitempty"`
	// Throttle answers the next Throttle matching calls with the protocol's
	// throttling error (Throttling, ThrottlingException, RequestLimitExceeded
	// or SlowDown), which the SDKs retry.
	Throttle int `json:"throttle,omitempty"`
	// Deny answers every matching call with the protocol's access-denied
	// error (AccessDenied, AccessDeniedException or UnauthorizedOperation)
	// naming service:Action, until ClearFaults.
	Deny bool `json:"deny,omitempty"`
}

type fault struct {
	Fault
	left int // throttles left
}

// Inject adds a fault. It needs a Service and either Throttle > 0 or Deny.
func (s *Sim) Inject(f Fault) error {
	if f.Service == "" {
		return fmt.Errorf("awssim: fault: service is required")
	}
	if f.Throttle <= 0 && !f.Deny {
		return fmt.Errorf("awssim: fault: set throttle > 0 or deny")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{Fault: f, left: f.Throttle})
	return nil
}

// Throttle answers the next n calls of service's action with the throttling
// error.
func (s *Sim) Throttle(service, action string, n int) {
	_ = s.Inject(Fault{Service: service, Action: action, Throttle: max(n, 1)})
}

// Deny answers every call of service's action with access denied, until
// ClearFaults.
func (s *Sim) Deny(service, action string) {
	_ = s.Inject(Fault{Service: service, Action: action, Deny: true})
}

// ClearFaults removes every injected fault.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// faultFor returns the error an injected fault makes of this call, if any.
// Deny wins over throttling; a throttle is used up only when it answers.
func (s *Sim) faultFor(q *request) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	match := func(f *fault) bool {
		return f.Service == q.service && (f.Action == "" || f.Action == "*" || f.Action == q.action) &&
			(f.Account == "" || f.Account == q.account())
	}
	for _, f := range s.faults {
		if f.Deny && match(f) {
			return deniedError(q.proto, q.service, q.action, q.cred.ARN)
		}
	}
	for _, f := range s.faults {
		if f.left > 0 && match(f) {
			f.left--
			s.faults = slices.DeleteFunc(s.faults, func(f *fault) bool { return !f.Deny && f.left == 0 })
			return throttleError(q.proto)
		}
	}
	return nil
}
