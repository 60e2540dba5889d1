package api

// These tests hold the standard-library replacements in k8snames.go, quantity.go and
// yamldocs.go to the apimachinery functions they replace: same verdicts, same messages,
// same order of quantities. Tests may import apimachinery; the client must not.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// nameChecks pairs each name check with the apimachinery function it replaces.
var nameChecks = []struct {
	name      string
	ours, k8s func(string) []string
}{
	{"IsDNS1123Label", isDNS1123Label, validation.IsDNS1123Label},
	{"IsDNS1123Subdomain", isDNS1123Subdomain, validation.IsDNS1123Subdomain},
	{"IsQualifiedName", isQualifiedName, validation.IsQualifiedName},
	{"IsValidLabelValue", isValidLabelValue, validation.IsValidLabelValue},
	{"IsValidPortName", isValidPortName, validation.IsValidPortName},
	{"IsEnvVarName", isEnvVarName, validation.IsEnvVarName},
}

// nameInputs returns names, label keys, ports and variable names, valid and not, with
// lengths around every limit.
func nameInputs() []string {
	in := []string{
		"", "a", "A", "0", "-", "_", ".", "..", "...", "..a", ".a", "a.", "a..b", "a-b", "a--b", "-a", "a-", "a_b",
		"my-name", "123-abc", "MyName", "my.name", "example.com", "Example.com", "example.com.", ".example.com",
		"a.b.c", "a-.b", "a.-b", "x/y", "/", "a/", "/a", "a/b/c", "example.com/MyName", "example.com/",
		"EXAMPLE.com/x", "-x.com/y", "x.com/-y", "x.com/y_", "kubernetes.io/hostname", "a/b", "a//b",
		"http", "http-alt", "h2c", "123", "1-2", "x-", "-x", "a--", "abcdefghijklmno", "abcdefghijklmnop",
		"MY_ENV.NAME", "my.env-name", "MyEnvName1", "1ABC", "A=B", "A B", "Ä", "é", "ab\n", "\na", "a b",
		"naïve", "日本", "a\x00b", "a$b", "PATH", "_", "-_.", "..PATH", ".PATH", "%", "a%2F", " a", "a ",
	}
	for _, n := range []int{14, 15, 16, 62, 63, 64, 252, 253, 254} {
		in = append(in, strings.Repeat("a", n), strings.Repeat("a", n-1)+"-", strings.Repeat("A", n))
		in = append(in, strings.Repeat("a.", n/2)+"a", strings.Repeat("ab.", n/3), "x.io/"+strings.Repeat("a", n))
		in = append(in, strings.Repeat("a", n)+"/x", strings.Repeat("a", n)+".com/"+strings.Repeat("b", n))
	}
	return in
}

// TestK8sNamesMatchAPIMachinery compares each name check with apimachinery's.
func TestK8sNamesMatchAPIMachinery(t *testing.T) {
	in := nameInputs()
	for _, c := range nameChecks {
		valid := 0
		for _, s := range in {
			got, want := c.ours(s), c.k8s(s)
			if !slices.Equal(got, want) {
				t.Errorf("%s(%q):\n got  %q\n want %q", c.name, s, got, want)
			}
			if len(want) == 0 {
				valid++
			}
		}
		if valid == 0 || valid == len(in) {
			t.Errorf("%s: %d of %d inputs valid; the table tests one side only", c.name, valid, len(in))
		}
	}
}

// FuzzK8sNames checks every name check against apimachinery's on the same input.
func FuzzK8sNames(f *testing.F) {
	for _, s := range nameInputs() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range nameChecks {
			if got, want := c.ours(s), c.k8s(s); !slices.Equal(got, want) {
				t.Errorf("%s(%q):\n got  %q\n want %q", c.name, s, got, want)
			}
		}
	})
}

// quantityInputs returns quantities, valid and not, including apimachinery's odd corners
// (a bare suffix or sign parses as 0).
func quantityInputs() []string {
	in := []string{
		"", "0", "00", "-0", "+0", "0.0", "1", "-1", "+1", "250m", "1.5", "512Mi", "10Gi", "1e3", "1k", "2G",
		"1.2.3", "10 Gi", " 1", "1 ", "1KiB", "1K", "1kb", "1g", "1mi", "1Mi1", "1x", "x", "--1", "+-1", "1-",
		"1+", "1e", "1E", "1e+", "1e-", "1e+3", "1E-3", "1e3.5", "1.e3", ".5e3", "1ee3", "1eE3", "1e3e3",
		"1Ki1", "1e1Ki", "1ki", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei", "1Zi", "1n", "1u", "1m", "1M", "1T",
		"1P", "1E", "1Z", "k", "Gi", "Ti", "Pi", "Ei", "Ki", "m", "n", "E", "e", "e3", "e-5", "e-9", "e-10",
		".", "-", "+", "-.", "+.", ".k", "-.Ei", ".5", "5.", "-.5", "0.5Ki", ".5Ki", "1.Ki", "1.5Gi", "-1.5Gi",
		"0.1n", "0.0000000001", "-0.0000000001", "0.000000001", "1.0000000001", "-1.0000000001", "1e-9",
		"1e-10", "-1e-10", "1.5e-9", "15e-10", "0e-20", "00e-20", "-e-20", "1234567890123456789",
		"123456789012345678", "12345678901234567890123", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "9223372036854775807Ki", "8Ei", "-8Ei", "7Ei", "7.99Ei", "8191Pi", "8192Pi",
		"16Ei", "0.000000000000000000001Ki", "1.0000000001Ki", "1e18", "1e19", "1e100", "1e-100",
		"1e308", "1e400", "100m", "0.1", "1000m", "1", "999m", "0.001", "1m", "1000000n", "1000u", "1024",
		"1Ki", "1000", "1k", "0.9765625Ki", "1000Mi", "1G", "1Gi", "1024Mi", "1.073741824G", "1e9",
		"1e2147483647", "1e-2147483648", "1e4294967296", "1e9223372036854775807", "1e9223372036854775808",
		"1e-4294967306", "e-4294967306",
	}
	for _, d := range []string{"1", "12", "999", "1000", "123456789", "0.000123"} {
		for suf := range quantitySuffixes {
			in = append(in, d+suf, "-"+d+suf)
		}
	}
	return in
}

// hugeExponent matches a decimal exponent of more than 3 digits. apimachinery takes
// seconds (or gigabytes) on some of those ("1e-20000000"), so the comparisons below
// leave them to TestQuantityHugeExponents.
var hugeExponent = regexp.MustCompile(`[eE][-+]?0*[1-9][0-9]{3,}$`)

// compareQuantity checks that parseQuantity(s) fails with apimachinery's error or
// succeeds with the same sign, and returns both parses.
func compareQuantity(t *testing.T, s string) (quantity, resource.Quantity, bool) {
	t.Helper()
	got, gotErr := parseQuantity(s)
	want, wantErr := resource.ParseQuantity(s)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Errorf("parseQuantity(%q) error %v, apimachinery %v", s, gotErr, wantErr)
		return got, want, false
	}
	if wantErr != nil {
		return got, want, false
	}
	if got.sign() != want.Sign() {
		t.Errorf("parseQuantity(%q).sign() = %d, apimachinery %d (%s)", s, got.sign(), want.Sign(), want.String())
	}
	if got.cmp(got) != 0 {
		t.Errorf("parseQuantity(%q) is not equal to itself", s)
	}
	return got, want, true
}

// TestQuantityMatchesAPIMachinery compares parseQuantity with resource.ParseQuantity on
// every input and cmp with Quantity.Cmp on every pair that parses.
func TestQuantityMatchesAPIMachinery(t *testing.T) {
	type parsed struct {
		s    string
		ours quantity
		k8s  resource.Quantity
	}
	var ok []parsed
	in := quantityInputs()
	for _, s := range in {
		if hugeExponent.MatchString(s) {
			continue
		}
		if ours, k8s, valid := compareQuantity(t, s); valid {
			ok = append(ok, parsed{s, ours, k8s})
		}
	}
	if len(ok) == 0 || len(ok) == len(in) {
		t.Fatalf("%d of %d quantities parse; the table tests one side only", len(ok), len(in))
	}
	for _, a := range ok {
		for _, b := range ok {
			if got, want := a.ours.cmp(b.ours), a.k8s.Cmp(b.k8s); got != want {
				t.Errorf("cmp(%q, %q) = %d, apimachinery %d", a.s, b.s, got, want)
			}
		}
	}
	t.Logf("%d inputs, %d parse, %d pairs compared", len(in), len(ok), len(ok)*len(ok))
}

// TestQuantityHugeExponents checks inputs whose exponents apimachinery cannot handle
// quickly or exactly: verdicts are apimachinery's, values are the exact ones (where
// apimachinery's int32 scale arithmetic may overflow), and nothing takes long.
func TestQuantityHugeExponents(t *testing.T) {
	cases := []struct {
		s    string
		err  error
		sign int
	}{
		{"1e-20000000", nil, 1}, // rounds up to 1n; apimachinery takes ~17 s
		{"-1e-999999999", nil, -1},
		{"1e999999999", nil, 1},
		{"123456789012345678901234567890e2000000000", nil, 1},
		{"e-2000000000", errQuantityNumeric, 0},
		{"e2000000000", nil, 0},
		{"1e4294967296", nil, 1}, // the int32 exponent wraps to 0
		{"1e9223372036854775808", errQuantitySuffix, 0},
	}
	start := time.Now()
	for _, c := range cases {
		q, err := parseQuantity(c.s)
		if !errors.Is(err, c.err) || q.sign() != c.sign {
			t.Errorf("parseQuantity(%q) = sign %d, %v; want sign %d, %v", c.s, q.sign(), err, c.sign, c.err)
		}
	}
	less := func(a, b string) {
		qa, _ := parseQuantity(a)
		qb, _ := parseQuantity(b)
		if qa.cmp(qb) != -1 || qb.cmp(qa) != 1 {
			t.Errorf("want %s < %s", a, b)
		}
	}
	less("1e-20000000", "2n")
	less("1n", "1.0000000001e-9")
	less("1e999999998", "1e999999999")
	less("99e999999998", "1e1000000000")
	less("-1e999999999", "-1e999999998")
	less("1e4294967295", "1e4294967296") // the exponents wrap to -1 and 0
	if q, _ := parseQuantity("1e4294967296"); q.cmp(quantity{m: big.NewInt(1)}) != 0 {
		t.Errorf("1e4294967296 should equal 1, as in apimachinery")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("huge exponents took %v", d)
	}
}

// FuzzQuantity checks parseQuantity against resource.ParseQuantity on two inputs, and
// cmp against Quantity.Cmp when both parse.
func FuzzQuantity(f *testing.F) {
	in := quantityInputs()
	for i, s := range in {
		f.Add(s, in[(i*7+3)%len(in)])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if hugeExponent.MatchString(a) || hugeExponent.MatchString(b) {
			return // too slow for apimachinery; see TestQuantityHugeExponents
		}
		qa, ka, okA := compareQuantity(t, a)
		qb, kb, okB := compareQuantity(t, b)
		if okA && okB {
			if got, want := qa.cmp(qb), ka.Cmp(kb); got != want {
				t.Errorf("cmp(%q, %q) = %d, apimachinery %d (%s vs %s)", a, b, got, want, ka.String(), kb.String())
			}
		}
	})
}

// readAllYAML reads every document of a stream with read, up to its first error, and
// renders them for comparison.
func readAllYAML(read func() ([]byte, error)) []string {
	var out []string
	for i := 0; i < 1000; i++ {
		doc, err := read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				out = append(out, "error: "+err.Error())
			}
			return out
		}
		out = append(out, strconv.Quote(string(doc)))
	}
	return append(out, "too many documents")
}

// yamlInputs returns YAML streams with separators in every position and form.
func yamlInputs() []string {
	return []string{
		"", "\n", "---", "---\n", "--- \n", "---\n---\n", "a: 1", "a: 1\n", "a: 1\n---\nb: 2\n",
		"---\na: 1\n---\nb: 2\n---\n", "a: 1\r\n---\r\nb: 2\r\n", "a: 1\r", "a: 1\r\r\n", "a\n---  # c\nb\n",
		"a\n---#c\nb", "a\n--- b\n", "a\n----\nb\n", "a\n ---\nb\n", "a\n---\t\n", "a\n---\v\nb", "a\n--- \u00a0\nb\n",
		"a\n...\nb\n", "- a\n- b\n---\n- c\n", "a: |\n  ---\n  text\n", "\n\n---\n\n", "---\n# only a comment\n",
		"#c\n---\n#d\n", "a\n---\n\n---\nb", "a\n---x\n", "key: " + strings.Repeat("v", 5000) + "\r\n---\nb\n",
		strings.Repeat("x", 4095) + "\r\n---\n" + strings.Repeat("y", 4097) + "\r",
	}
}

// TestYAMLDocReaderMatchesAPIMachinery compares yamlDocReader with apimachinery's YAMLReader.
func TestYAMLDocReaderMatchesAPIMachinery(t *testing.T) {
	for _, s := range yamlInputs() {
		checkYAMLDocs(t, s)
	}
}

// FuzzYAMLDocReader compares yamlDocReader with apimachinery's YAMLReader on any stream.
func FuzzYAMLDocReader(f *testing.F) {
	for _, s := range yamlInputs() {
		f.Add(s)
	}
	f.Fuzz(checkYAMLDocs)
}

// checkYAMLDocs checks that both readers split s into the same documents and errors.
func checkYAMLDocs(t *testing.T, s string) {
	got := readAllYAML(newYAMLDocReader(strings.NewReader(s)).Read)
	want := readAllYAML(utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s))).Read)
	if !slices.Equal(got, want) {
		t.Errorf("documents of %q:\n got  %v\n want %v", s, got, want)
	}
}
