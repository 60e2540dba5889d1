package awssim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const isoTime = "2006-01-02T15:04:05Z"

func (s *Sim) stsActions() map[string]handler {
	return map[string]handler{
		"GetCallerIdentity": s.getCallerIdentity,
		"AssumeRole":        s.assumeRole,
	}
}

type callerIdentity struct {
	UserID  string `xml:"UserId"`
	Account string `xml:"Account"`
	Arn     string `xml:"Arn"`
}

func (s *Sim) getCallerIdentity(q *request) (*reply, *apiError) {
	return &reply{body: callerIdentity{UserID: q.cred.userID, Account: q.cred.account, Arn: q.cred.ARN}}, nil
}

var assumedARN = regexp.MustCompile(`^arn:aws:sts::(\d{12}):assumed-role/([^/]+)/`)

// matchAssumed splits an assumed-role session ARN into account and role name.
func matchAssumed(arn string) []string { return assumedARN.FindStringSubmatch(arn) }

var roleARN = regexp.MustCompile(`^arn:aws:iam::(\d{12}):role/(?:[\w+=,.@-]+/)*([\w+=,.@-]{1,64})$`)

func (s *Sim) assumeRole(q *request) (*reply, *apiError) {
	arn, session := q.form.Get("RoleArn"), q.form.Get("RoleSessionName")
	if arn == "" || session == "" {
		return nil, errorf(http.StatusBadRequest, "ValidationError", "RoleArn and RoleSessionName are required")
	}
	if !matches(`^[\w+=,.@-]{2,64}$`, session) {
		return nil, errorf(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value '%s' at 'roleSessionName' failed to satisfy constraint", session)
	}
	denied := errorf(http.StatusForbidden, "AccessDenied", "User: %s is not authorized to perform: sts:AssumeRole on resource: %s", q.cred.ARN, arn)
	m := roleARN.FindStringSubmatch(arn)
	if m == nil {
		return nil, errorf(http.StatusBadRequest, "ValidationError", "%s is not a valid role ARN", arn)
	}
	role := s.state.roles[m[1]+"/"+m[2]]
	if role == nil || role.Arn != arn {
		return nil, denied
	}
	if !role.trusts(q.cred) {
		return nil, denied
	}
	if want := role.externalIDs(); len(want) > 0 {
		got := q.form.Get("ExternalId")
		found := false
		for _, w := range want {
			found = found || w == got
		}
		if !found {
			return nil, denied
		}
	}
	d := time.Hour
	if v := q.form.Get("DurationSeconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 900 || n > role.MaxSessionDuration {
			return nil, errorf(http.StatusBadRequest, "ValidationError", "The requested DurationSeconds %s exceeds the MaxSessionDuration set for this role or is under 900", v)
		}
		d = time.Duration(n) * time.Second
	}
	c := s.newSessionLocked(role.account, role.Name, role.RoleID, session, d)
	type creds struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string `xml:"SecretAccessKey"`
		SessionToken    string `xml:"SessionToken"`
		Expiration      string `xml:"Expiration"`
	}
	type user struct {
		AssumedRoleID string `xml:"AssumedRoleId"`
		Arn           string `xml:"Arn"`
	}
	return &reply{body: struct {
		Credentials     creds `xml:"Credentials"`
		AssumedRoleUser user  `xml:"AssumedRoleUser"`
	}{
		creds{c.AccessKeyID, c.SecretAccessKey, c.SessionToken, c.expires.Format(isoTime)},
		user{c.userID, c.ARN},
	}}, nil
}

// policyStatement is the part of a trust policy statement the stand-in reads.
type policyStatement struct {
	Effect    string                     `json:"Effect"`
	Principal json.RawMessage            `json:"Principal"`
	Action    json.RawMessage            `json:"Action"`
	Condition map[string]json.RawMessage `json:"Condition"`
}

func (r *iamRole) statements() []policyStatement {
	var doc struct {
		Statement json.RawMessage `json:"Statement"`
	}
	if json.Unmarshal([]byte(r.AssumeRolePolicyDocument), &doc) != nil {
		return nil
	}
	var list []policyStatement
	if json.Unmarshal(doc.Statement, &list) != nil {
		var one policyStatement
		if json.Unmarshal(doc.Statement, &one) != nil {
			return nil
		}
		list = []policyStatement{one}
	}
	return list
}

// stringOrList reads an IAM policy value that is a string or a list.
func stringOrList(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var list []string
	_ = json.Unmarshal(raw, &list)
	return list
}

// trusts reports whether the role's trust policy lets the caller assume it:
// an Allow statement for sts:AssumeRole whose AWS principal is "*", the
// caller's account (ID or root ARN), or the caller's ARN (for a session, its
// role's ARN).
func (r *iamRole) trusts(c *credential) bool {
	callerARN := c.ARN
	if m := matchAssumed(c.ARN); m != nil {
		callerARN = "arn:aws:iam::" + m[1] + ":role/" + m[2]
	}
	for _, st := range r.statements() {
		if st.Effect != "Allow" || !containsAction(stringOrList(st.Action), "sts:AssumeRole") {
			continue
		}
		var p struct {
			AWS json.RawMessage `json:"AWS"`
		}
		var star string
		if json.Unmarshal(st.Principal, &star) == nil && star == "*" {
			return true
		}
		if json.Unmarshal(st.Principal, &p) != nil || p.AWS == nil {
			continue
		}
		for _, v := range stringOrList(p.AWS) {
			if v == "*" || v == c.account || v == "arn:aws:iam::"+c.account+":root" || v == callerARN {
				return true
			}
		}
	}
	return false
}

func containsAction(actions []string, want string) bool {
	for _, a := range actions {
		if a == want || a == "sts:*" || a == "*" {
			return true
		}
	}
	return false
}

// externalIDs are the sts:ExternalId values the trust policy requires.
func (r *iamRole) externalIDs() []string {
	var out []string
	for _, st := range r.statements() {
		if raw, ok := st.Condition["StringEquals"]; ok {
			var cond map[string]json.RawMessage
			if json.Unmarshal(raw, &cond) == nil {
				for k, v := range cond {
					if strings.EqualFold(k, "sts:ExternalId") {
						out = append(out, stringOrList(v)...)
					}
				}
			}
		}
	}
	return out
}

// TrustPolicy returns a role trust policy that lets principal (an account ID
// or an ARN) assume the role, requiring externalID when it is not empty.
func TrustPolicy(principal, externalID string) string {
	st := map[string]any{
		"Effect":    "Allow",
		"Principal": map[string]any{"AWS": principal},
		"Action":    "sts:AssumeRole",
	}
	if externalID != "" {
		st["Condition"] = map[string]any{"StringEquals": map[string]string{"sts:ExternalId": externalID}}
	}
	b, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{st}})
	return string(b)
}

// AddRole creates an IAM role in an account, as a user would outside
// QleetOS (e.g. the role a cloud account assumes), and returns its ARN.
func (s *Sim) AddRole(accountID, name, trustPolicy string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accounts[accountID] == nil {
		return "", fmt.Errorf("awssim: no account %q", accountID)
	}
	r, e := s.createRoleLocked(accountID, name, "/", trustPolicy, "", nil)
	if e != nil {
		return "", e
	}
	return r.Arn, nil
}
