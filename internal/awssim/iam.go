package awssim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

type iamRole struct {
	Name                     string
	Path                     string
	RoleID                   string
	Arn                      string
	CreateDate               string
	AssumeRolePolicyDocument string
	Description              string
	MaxSessionDuration       int
	Tags                     tagMap
	account                  string
	attached                 []string          // managed policy ARNs, in attach order
	inline                   map[string]string // inline policy name -> document
}

type oidcProvider struct {
	ARN        string
	URL        string
	ClientIDs  []string
	Thumbprint []string
	CreateDate string
	Tags       tagMap
	account    string
}

type xmlTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

func (t *tagMap) xml() []xmlTag { return tagsXML(t.m) }

// tagsXML lists tags sorted by key, as the XML protocols carry them.
func tagsXML(m map[string]string) []xmlTag {
	var out []xmlTag
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, xmlTag{k, m[k]})
	}
	return out
}

type roleXML struct {
	Path                     string   `xml:"Path"`
	RoleName                 string   `xml:"RoleName"`
	RoleID                   string   `xml:"RoleId"`
	Arn                      string   `xml:"Arn"`
	CreateDate               string   `xml:"CreateDate"`
	AssumeRolePolicyDocument string   `xml:"AssumeRolePolicyDocument"`
	Description              string   `xml:"Description,omitempty"`
	MaxSessionDuration       int      `xml:"MaxSessionDuration"`
	Tags                     []xmlTag `xml:"Tags>member"`
}

func (r *iamRole) xml() roleXML {
	return roleXML{r.Path, r.Name, r.RoleID, r.Arn, r.CreateDate, url.QueryEscape(r.AssumeRolePolicyDocument),
		r.Description, r.MaxSessionDuration, r.Tags.xml()}
}

func (s *Sim) iamActions() map[string]handler {
	return map[string]handler{
		"CreateRole":                  s.createRole,
		"GetRole":                     s.getRole,
		"DeleteRole":                  s.deleteRole,
		"TagRole":                     s.tagRole,
		"UntagRole":                   s.untagRole,
		"AttachRolePolicy":            s.attachRolePolicy,
		"DetachRolePolicy":            s.detachRolePolicy,
		"ListAttachedRolePolicies":    s.listAttachedRolePolicies,
		"PutRolePolicy":               s.putRolePolicy,
		"DeleteRolePolicy":            s.deleteRolePolicy,
		"ListRolePolicies":            s.listRolePolicies,
		"CreateOpenIDConnectProvider": s.createOIDCProvider,
		"GetOpenIDConnectProvider":    s.getOIDCProvider,
		"DeleteOpenIDConnectProvider": s.deleteOIDCProvider,
		"ListOpenIDConnectProviders":  s.listOIDCProviders,
		"TagOpenIDConnectProvider":    s.tagOIDCProvider,
		"UpdateAssumeRolePolicy":      s.updateAssumeRolePolicy,
		"ListRoleTags":                s.listRoleTags,
	}
}

func noSuchRole(name string) *apiError {
	return errorf(http.StatusNotFound, "NoSuchEntity", "The role with name %s cannot be found.", name)
}

func (s *Sim) roleFor(q *request) (*iamRole, *apiError) {
	name := q.form.Get("RoleName")
	if name == "" {
		return nil, errorf(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value null at 'roleName' failed to satisfy constraint: Member must not be null")
	}
	r := s.state.roles[q.account()+"/"+name]
	if r == nil {
		return nil, noSuchRole(name)
	}
	return r, nil
}

func (s *Sim) createRoleLocked(account, name, path, trust, description string, tags []map[string]string) (*iamRole, *apiError) {
	if !matches(`^[\w+=,.@-]{1,64}$`, name) {
		return nil, errorf(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value '%s' at 'roleName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", name)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(trust), &doc); err != nil {
		return nil, errorf(http.StatusBadRequest, "MalformedPolicyDocument", "This policy contains invalid Json")
	}
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") || !strings.HasSuffix(path, "/") {
		return nil, errorf(http.StatusBadRequest, "ValidationError", "The specified value for path is invalid. It must begin and end with / and contain only alphanumeric characters and/or / characters.")
	}
	key := account + "/" + name
	if s.state.roles[key] != nil {
		return nil, errorf(http.StatusConflict, "EntityAlreadyExists", "Role with name %s already exists.", name)
	}
	r := &iamRole{Name: name, Path: path, RoleID: "AROA" + randomString(17, upperDigits),
		Arn: fmt.Sprintf("arn:aws:iam::%s:role%s%s", account, path, name), CreateDate: s.now().Format(isoTime),
		AssumeRolePolicyDocument: trust, Description: description, MaxSessionDuration: 3600, account: account,
		inline: map[string]string{}}
	for _, t := range tags {
		r.Tags.set(t["Key"], t["Value"])
	}
	s.state.roles[key] = r
	return r, nil
}

func (s *Sim) createRole(q *request) (*reply, *apiError) {
	r, e := s.createRoleLocked(q.account(), q.form.Get("RoleName"), q.form.Get("Path"), q.form.Get("AssumeRolePolicyDocument"),
		q.form.Get("Description"), formStructs(q.form, "Tags"))
	if e != nil {
		return nil, e
	}
	if v := q.form.Get("MaxSessionDuration"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 3600 && n <= 43200 {
			r.MaxSessionDuration = n
		}
	}
	return &reply{body: struct {
		Role roleXML `xml:"Role"`
	}{r.xml()}}, nil
}

func (s *Sim) getRole(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	return &reply{body: struct {
		Role roleXML `xml:"Role"`
	}{r.xml()}}, nil
}

func (s *Sim) deleteRole(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	if len(r.attached) > 0 || len(r.inline) > 0 {
		return nil, errorf(http.StatusConflict, "DeleteConflict", "Cannot delete entity, must detach all policies first.")
	}
	delete(s.state.roles, q.account()+"/"+r.Name)
	return &reply{}, nil
}

func (s *Sim) tagRole(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	for _, t := range formStructs(q.form, "Tags") {
		r.Tags.set(t["Key"], t["Value"])
	}
	return &reply{}, nil
}

func (s *Sim) untagRole(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	for _, k := range formList(q.form, "TagKeys") {
		delete(r.Tags.m, k)
	}
	return &reply{}, nil
}

func (s *Sim) listRoleTags(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	return &reply{body: struct {
		Tags        []xmlTag `xml:"Tags>member"`
		IsTruncated bool     `xml:"IsTruncated"`
	}{r.Tags.xml(), false}}, nil
}

func (s *Sim) updateAssumeRolePolicy(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	doc := q.form.Get("PolicyDocument")
	if json.Unmarshal([]byte(doc), new(map[string]any)) != nil {
		return nil, errorf(http.StatusBadRequest, "MalformedPolicyDocument", "This policy contains invalid Json")
	}
	r.AssumeRolePolicyDocument = doc
	return &reply{}, nil
}

var policyARN = `^arn:aws:iam::(aws|\d{12}):policy/([\w+=,.@/-]+)$`

func (s *Sim) attachRolePolicy(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	arn := q.form.Get("PolicyArn")
	if !matches(policyARN, arn) {
		return nil, errorf(http.StatusBadRequest, "InvalidInput", "ARN %s is not valid.", arn)
	}
	if !slices.Contains(r.attached, arn) {
		r.attached = append(r.attached, arn)
	}
	return &reply{}, nil
}

func (s *Sim) detachRolePolicy(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	arn := q.form.Get("PolicyArn")
	i := slices.Index(r.attached, arn)
	if i < 0 {
		return nil, errorf(http.StatusNotFound, "NoSuchEntity", "Policy %s was not found.", arn)
	}
	r.attached = slices.Delete(r.attached, i, i+1)
	return &reply{}, nil
}

func (s *Sim) listAttachedRolePolicies(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	type attached struct {
		PolicyName string `xml:"PolicyName"`
		PolicyArn  string `xml:"PolicyArn"`
	}
	var list []attached
	for _, a := range r.attached {
		list = append(list, attached{a[strings.LastIndex(a, "/")+1:], a})
	}
	return &reply{body: struct {
		AttachedPolicies []attached `xml:"AttachedPolicies>member"`
		IsTruncated      bool       `xml:"IsTruncated"`
	}{list, false}}, nil
}

func (s *Sim) putRolePolicy(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	name, doc := q.form.Get("PolicyName"), q.form.Get("PolicyDocument")
	if name == "" {
		return nil, errorf(http.StatusBadRequest, "ValidationError", "PolicyName is required")
	}
	if json.Unmarshal([]byte(doc), new(map[string]any)) != nil {
		return nil, errorf(http.StatusBadRequest, "MalformedPolicyDocument", "This policy contains invalid Json")
	}
	q.param("PolicyName", name)
	r.inline[name] = doc
	return &reply{}, nil
}

func (s *Sim) deleteRolePolicy(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	name := q.form.Get("PolicyName")
	q.param("PolicyName", name)
	if _, ok := r.inline[name]; !ok {
		return nil, errorf(http.StatusNotFound, "NoSuchEntity", "The role policy with name %s cannot be found.", name)
	}
	delete(r.inline, name)
	return &reply{}, nil
}

func (s *Sim) listRolePolicies(q *request) (*reply, *apiError) {
	r, e := s.roleFor(q)
	if e != nil {
		return nil, e
	}
	var names []string
	for n := range r.inline {
		names = append(names, n)
	}
	slices.Sort(names)
	return &reply{body: struct {
		PolicyNames []string `xml:"PolicyNames>member"`
		IsTruncated bool     `xml:"IsTruncated"`
	}{names, false}}, nil
}

func (s *Sim) createOIDCProvider(q *request) (*reply, *apiError) {
	u := q.form.Get("Url")
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "https" || pu.Host == "" {
		return nil, errorf(http.StatusBadRequest, "InvalidInput", "Url %q must be an https URL", u)
	}
	arn := fmt.Sprintf("arn:aws:iam::%s:oidc-provider/%s%s", q.account(), pu.Host, strings.TrimSuffix(pu.Path, "/"))
	if s.state.oidc[arn] != nil {
		return nil, errorf(http.StatusConflict, "EntityAlreadyExists", "Provider with url %s already exists.", u)
	}
	p := &oidcProvider{ARN: arn, URL: u, ClientIDs: formList(q.form, "ClientIDList"), Thumbprint: formList(q.form, "ThumbprintList"),
		CreateDate: s.now().Format(isoTime), account: q.account()}
	for _, t := range formStructs(q.form, "Tags") {
		p.Tags.set(t["Key"], t["Value"])
	}
	s.state.oidc[arn] = p
	return &reply{body: struct {
		Arn  string   `xml:"OpenIDConnectProviderArn"`
		Tags []xmlTag `xml:"Tags>member"`
	}{arn, p.Tags.xml()}}, nil
}

func (s *Sim) oidcFor(q *request) (*oidcProvider, *apiError) {
	arn := q.form.Get("OpenIDConnectProviderArn")
	p := s.state.oidc[arn]
	if p == nil || p.account != q.account() {
		return nil, errorf(http.StatusNotFound, "NoSuchEntity", "OpenIDConnect Provider not found for arn %s", arn)
	}
	return p, nil
}

func (s *Sim) getOIDCProvider(q *request) (*reply, *apiError) {
	p, e := s.oidcFor(q)
	if e != nil {
		return nil, e
	}
	return &reply{body: struct {
		URL        string   `xml:"Url"`
		ClientIDs  []string `xml:"ClientIDList>member"`
		Thumbprint []string `xml:"ThumbprintList>member"`
		CreateDate string   `xml:"CreateDate"`
		Tags       []xmlTag `xml:"Tags>member"`
	}{strings.TrimPrefix(p.URL, "https://"), p.ClientIDs, p.Thumbprint, p.CreateDate, p.Tags.xml()}}, nil
}

func (s *Sim) tagOIDCProvider(q *request) (*reply, *apiError) {
	p, e := s.oidcFor(q)
	if e != nil {
		return nil, e
	}
	for _, t := range formStructs(q.form, "Tags") {
		p.Tags.set(t["Key"], t["Value"])
	}
	return &reply{}, nil
}

func (s *Sim) deleteOIDCProvider(q *request) (*reply, *apiError) {
	p, e := s.oidcFor(q)
	if e != nil {
		return nil, e
	}
	delete(s.state.oidc, p.ARN)
	return &reply{}, nil
}

func (s *Sim) listOIDCProviders(q *request) (*reply, *apiError) {
	type entry struct {
		Arn string `xml:"Arn"`
	}
	var list []entry
	for arn, p := range s.state.oidc {
		if p.account == q.account() {
			list = append(list, entry{arn})
		}
	}
	slices.SortFunc(list, func(a, b entry) int { return strings.Compare(a.Arn, b.Arn) })
	return &reply{body: struct {
		List []entry `xml:"OpenIDConnectProviderList>member"`
	}{list}}, nil
}
