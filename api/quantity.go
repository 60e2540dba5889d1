package api

// Kubernetes resource quantities ("250m", "1.5", "512Mi", "1e3"), re-implemented from
// k8s.io/apimachinery/pkg/api/resource (Apache-2.0) so that the client need not import
// apimachinery. parseQuantity accepts and rejects what resource.ParseQuantity does, with
// the same error messages, and the value it yields compares (sign, cmp) as
// resource.Quantity's does.

import (
	"cmp"
	"errors"
	"math/big"
	"regexp"
	"strconv"
)

// The errors of resource.ParseQuantity, word for word: they reach users in field errors.
var (
	errQuantityFormat  = errors.New("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
	errQuantityNumeric = errors.New("unable to parse numeric part of quantity")
	errQuantitySuffix  = errors.New("unable to parse quantity's suffix")
)

// quantityRE splits a quantity into sign, integer digits, fraction digits and suffix. It is
// as lax as apimachinery's scanner (a bare sign, "." or suffix passes); the suffix is
// checked afterwards.
var quantityRE = regexp.MustCompile(`^([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)$`)

// quantitySuffixes maps the SI suffixes to a power of ten and the binary ones to a power of two.
var quantitySuffixes = map[string]struct {
	exp    int64
	binary bool
}{
	"n": {-9, false}, "u": {-6, false}, "m": {-3, false}, "": {0, false},
	"k": {3, false}, "M": {6, false}, "G": {9, false}, "T": {12, false}, "P": {15, false}, "E": {18, false},
	"Ki": {10, true}, "Mi": {20, true}, "Gi": {30, true}, "Ti": {40, true}, "Pi": {50, true}, "Ei": {60, true},
}

// maxBinaryQuantity is the cap resource.ParseQuantity puts on quantities with a binary
// suffix: the largest int64.
var maxBinaryQuantity = big.NewInt(1<<63 - 1)

// quantity is the exact value of a parsed quantity, m × 10^exp. The zero value is 0.
// The exponent is kept apart rather than multiplied out (say into a big.Rat) because a
// short string such as "1e999999999" would otherwise take gigabytes.
type quantity struct {
	m   *big.Int
	exp int64
}

// parseQuantity parses a Kubernetes quantity like resource.ParseQuantity: a signed
// decimal number followed by an SI suffix (n u m k M G T P E), a binary suffix
// (Ki Mi Gi Ti Pi Ei) or a decimal exponent (e3, E-2). Like ParseQuantity, it rounds
// non-zero values away from zero to a multiple of 10^-9, caps values with a binary
// suffix at ±(2^63-1), and takes an exponent modulo 2^32 (as an int32).
func parseQuantity(s string) (quantity, error) {
	parts := quantityRE.FindStringSubmatch(s)
	if s == "" || parts == nil {
		return quantity{}, errQuantityFormat
	}
	sign, intPart, frac, suffix := parts[1], parts[2], parts[3], parts[4]
	suf, ok := quantitySuffixes[suffix]
	if !ok {
		if len(suffix) < 2 || (suffix[0] != 'e' && suffix[0] != 'E') {
			return quantity{}, errQuantitySuffix
		}
		e, err := strconv.ParseInt(suffix[1:], 10, 64)
		if err != nil {
			return quantity{}, errQuantitySuffix
		}
		suf.exp = int64(int32(e)) // apimachinery keeps exponents in an int32
	}
	if intPart == "" && frac == "" {
		// No digits at all ("-", ".", "k"): apimachinery reads 0 on its fast path but
		// fails on its exact path, which it takes below 10^-9 and for Pi and Ei.
		if (suf.binary && suf.exp >= 50) || (!suf.binary && suf.exp < -9) {
			return quantity{}, errQuantityNumeric
		}
		return quantity{m: new(big.Int)}, nil
	}

	m, _ := new(big.Int).SetString(intPart+frac, 10)
	if sign == "-" {
		m.Neg(m)
	}
	q := quantity{m: m, exp: -int64(len(frac))}
	if suf.binary {
		m.Lsh(m, uint(suf.exp))
	} else {
		q.exp += suf.exp
	}
	q.roundToNano()
	if suf.binary {
		// Cap at ±(2^63-1), the limit on q's side of zero.
		limit := quantity{m: new(big.Int).Mul(big.NewInt(int64(q.sign())), maxBinaryQuantity)}
		if q.cmp(limit)*q.sign() > 0 {
			q = limit
		}
	}
	return q, nil
}

// roundToNano rounds q away from zero to a multiple of 10^-9, the smallest amount a
// resource.Quantity holds.
func (q *quantity) roundToNano() {
	if q.exp >= -9 || q.m.Sign() == 0 {
		return
	}
	shift := -9 - q.exp
	abs := new(big.Int).Abs(q.m)
	if int64(len(abs.String())) <= shift {
		// |m| < 10^shift: the value is below 10^-9 and rounds to it.
		abs.SetInt64(1)
	} else {
		quo, rem := abs.QuoRem(abs, pow10(shift), new(big.Int))
		if rem.Sign() != 0 {
			quo.Add(quo, big.NewInt(1))
		}
	}
	if q.m.Sign() < 0 {
		abs.Neg(abs)
	}
	q.m, q.exp = abs, -9
}

// sign returns -1, 0 or +1 as q is negative, zero or positive, like Quantity.Sign.
func (q quantity) sign() int {
	if q.m == nil {
		return 0
	}
	return q.m.Sign()
}

// cmp returns -1, 0 or +1 as q is less than, equal to or greater than o, like
// Quantity.Cmp.
func (q quantity) cmp(o quantity) int {
	s := q.sign()
	if t := o.sign(); s != t || s == 0 {
		return cmp.Compare(s, t)
	}
	// Both have sign s. Compare magnitudes by their number of digits first, so that
	// neither 10^exp is computed when the exponents are far apart.
	a, b := new(big.Int).Abs(q.m), new(big.Int).Abs(o.m)
	if c := cmp.Compare(int64(len(a.String()))+q.exp, int64(len(b.String()))+o.exp); c != 0 {
		return s * c
	}
	// Same magnitude, so the exponents differ by less than the digits of a or b.
	if q.exp > o.exp {
		a.Mul(a, pow10(q.exp-o.exp))
	} else {
		b.Mul(b, pow10(o.exp-q.exp))
	}
	return s * a.Cmp(b)
}

// pow10 returns 10^n for n >= 0.
func pow10(n int64) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(n), nil)
}
