package provider

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"testing"

	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// TestDNSProviderValuesAgree: the values of dns_provider that the Terraform provider accepts are exactly
// those the API accepts, and exactly those its description (and so the generated docs) lists; no guide
// says otherwise.
func TestDNSProviderValuesAgree(t *testing.T) {
	t.Parallel()
	attr := domainNameKind.attributes["dns_provider"].(rschema.StringAttribute)
	documented := regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(attr.Description, -1)
	candidates := []string{"cloudflare", "Route53", "NONE", "google", "azure", " none"}
	var listed []string
	for _, m := range documented {
		listed = append(listed, m[1])
	}
	candidates = append(append(candidates, listed...), api.DNSProviders...)
	ki, ok := api.LookupKind(api.KindDomainName)
	require.True(t, ok)
	var byProvider, byAPI []string
	for _, v := range candidates {
		providerOK := true
		for _, val := range attr.Validators {
			if len(validateString(val, types.StringValue(v))) > 0 {
				providerOK = false
			}
		}
		if providerOK && !slices.Contains(byProvider, v) {
			byProvider = append(byProvider, v)
		}
		spec := &api.DomainNameSpec{Zone: "example.com", Provider: v}
		apiOK := !slices.ContainsFunc(ki.Validate(spec), func(fe api.FieldError) bool { return fe.Field == "spec.provider" })
		if apiOK && !slices.Contains(byAPI, v) {
			byAPI = append(byAPI, v)
		}
	}
	sort.Strings(byProvider)
	sort.Strings(byAPI)
	sort.Strings(listed)
	require.NotEmpty(t, byAPI)
	require.Equal(t, byAPI, byProvider, "the provider accepts what the API accepts")
	require.Equal(t, byAPI, listed, "the description lists what is accepted")

	doc, err := os.ReadFile("../docs/resources/domain_name.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), "`dns_provider` (String) "+attr.Description, "docs/ is generated from the description (make docs)")
	for _, guide := range []string{"../templates/guides/aws.md.tmpl", "../docs/guides/aws.md"} {
		b, err := os.ReadFile(guide)
		require.NoError(t, err)
		require.NotRegexp(t, `(?s)dns_provider[^.]{0,80}?(not yet accepted|accepts only)`, string(b), "%s says the provider refuses a value it accepts", guide)
	}
}
