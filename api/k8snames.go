package api

// Kubernetes name syntax, re-implemented from k8s.io/apimachinery/pkg/util/validation
// (Apache-2.0) so that the client need not import apimachinery. Each check returns the
// same messages, word for word, as the apimachinery function of the same name (they
// reach users as field errors), and nil when the value is valid.

import (
	"fmt"
	"regexp"
	"strings"
)

const (
	dns1123LabelFmt        = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
	dns1123LabelErrMsg     = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
	dns1123SubdomainFmt    = dns1123LabelFmt + "(\\." + dns1123LabelFmt + ")*"
	dns1123SubdomainErrMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
	qualifiedNameFmt       = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
	qualifiedNameErrMsg    = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
	labelValueFmt          = "(" + qualifiedNameFmt + ")?"
	labelValueErrMsg       = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
	envVarNameFmt          = "[-._a-zA-Z][-._a-zA-Z0-9]*"
	envVarNameErrMsg       = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit"
)

var (
	dns1123LabelRE     = regexp.MustCompile("^" + dns1123LabelFmt + "$")
	dns1123SubdomainRE = regexp.MustCompile("^" + dns1123SubdomainFmt + "$")
	qualifiedNameRE    = regexp.MustCompile("^" + qualifiedNameFmt + "$")
	labelValueRE       = regexp.MustCompile("^" + labelValueFmt + "$")
	envVarNameRE       = regexp.MustCompile("^" + envVarNameFmt + "$")
	portNameCharsRE    = regexp.MustCompile("^[-a-z0-9]+$")
	portNameLetterRE   = regexp.MustCompile("[a-z]")
)

// isDNS1123Label checks a DNS label (RFC 1123): at most 63 lower-case alphanumerics or
// '-', starting and ending with an alphanumeric. Like validation.IsDNS1123Label.
func isDNS1123Label(value string) []string {
	var errs []string
	if len(value) > 63 {
		errs = append(errs, maxLenMsg(63))
	}
	switch {
	case dns1123LabelRE.MatchString(value):
	case dns1123SubdomainRE.MatchString(value):
		// A valid subdomain but not a label: the length was checked, so it has dots.
		errs = append(errs, "must not contain dots")
	default:
		errs = append(errs, regexMsg(dns1123LabelErrMsg, dns1123LabelFmt, "my-name", "123-abc"))
	}
	return errs
}

// isDNS1123Subdomain checks a DNS subdomain (RFC 1123): at most 253 characters of
// dot-separated labels. Like validation.IsDNS1123Subdomain.
func isDNS1123Subdomain(value string) []string {
	var errs []string
	if len(value) > 253 {
		errs = append(errs, maxLenMsg(253))
	}
	if !dns1123SubdomainRE.MatchString(value) {
		errs = append(errs, regexMsg(dns1123SubdomainErrMsg, dns1123SubdomainFmt, "example.com"))
	}
	return errs
}

// isQualifiedName checks a label key or annotation key: a name of at most 63
// alphanumerics, '-', '_' or '.' (alphanumeric at both ends), optionally preceded by a
// DNS subdomain and '/'. Like validation.IsQualifiedName.
func isQualifiedName(value string) []string {
	var errs []string
	parts := strings.Split(value, "/")
	name := parts[len(parts)-1]
	switch len(parts) {
	case 1:
	case 2:
		if parts[0] == "" {
			errs = append(errs, "prefix part must be non-empty")
		} else {
			for _, m := range isDNS1123Subdomain(parts[0]) {
				errs = append(errs, "prefix part "+m)
			}
		}
	default:
		return append(errs, "a qualified name "+regexMsg(qualifiedNameErrMsg, qualifiedNameFmt, "MyName", "my.name", "123-abc")+
			" with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
	}
	if name == "" {
		errs = append(errs, "name part must be non-empty")
	} else if len(name) > 63 {
		errs = append(errs, "name part "+maxLenMsg(63))
	}
	if !qualifiedNameRE.MatchString(name) {
		errs = append(errs, "name part "+regexMsg(qualifiedNameErrMsg, qualifiedNameFmt, "MyName", "my.name", "123-abc"))
	}
	return errs
}

// isValidLabelValue checks a label value: empty, or at most 63 alphanumerics, '-', '_'
// or '.' starting and ending with an alphanumeric. Like validation.IsValidLabelValue.
func isValidLabelValue(value string) []string {
	var errs []string
	if len(value) > 63 {
		errs = append(errs, maxLenMsg(63))
	}
	if !labelValueRE.MatchString(value) {
		errs = append(errs, regexMsg(labelValueErrMsg, labelValueFmt, "MyValue", "my_value", "12345"))
	}
	return errs
}

// isValidPortName checks a named port (an IANA service name, lower case only): 1 to 15
// characters of [-a-z0-9] with at least one letter, no "--", and no '-' at either end.
// Like validation.IsValidPortName.
func isValidPortName(port string) []string {
	var errs []string
	if len(port) > 15 {
		errs = append(errs, maxLenMsg(15))
	}
	if !portNameCharsRE.MatchString(port) {
		errs = append(errs, "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
	}
	if !portNameLetterRE.MatchString(port) {
		errs = append(errs, "must contain at least one letter (a-z)")
	}
	if strings.Contains(port, "--") {
		errs = append(errs, "must not contain consecutive hyphens")
	}
	if strings.HasPrefix(port, "-") || strings.HasSuffix(port, "-") {
		errs = append(errs, "must not begin or end with a hyphen")
	}
	return errs
}

// isEnvVarName checks an environment variable name: letters, digits, '_', '-' or '.',
// not starting with a digit, and not ".", ".." nor starting with "..". Like
// validation.IsEnvVarName (the strict form, not IsRelaxedEnvVarName).
func isEnvVarName(value string) []string {
	var errs []string
	if !envVarNameRE.MatchString(value) {
		errs = append(errs, regexMsg(envVarNameErrMsg, envVarNameFmt, "my.env-name", "MY_ENV.NAME", "MyEnvName1"))
	}
	switch {
	case value == ".":
		errs = append(errs, "must not be '.'")
	case value == "..":
		errs = append(errs, "must not be '..'")
	case strings.HasPrefix(value, ".."):
		errs = append(errs, "must not start with '..'")
	}
	return errs
}

// maxLenMsg is apimachinery's message for a value longer than n bytes.
func maxLenMsg(n int) string {
	return fmt.Sprintf("must be no more than %d characters", n)
}

// regexMsg is apimachinery's message for a value that does not match the regular
// expression re, with examples of valid values.
func regexMsg(msg, re string, examples ...string) string {
	var b strings.Builder
	b.WriteString(msg + " (e.g. ")
	for i, e := range examples {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.WriteString("'" + e + "', ")
	}
	b.WriteString("regex used for validation is '" + re + "')")
	return b.String()
}
