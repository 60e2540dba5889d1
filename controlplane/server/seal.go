package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// Sealed value formats. A write-only field is stored as one JSON string in the current format,
// "enc:v2:<key id>:<base64 of nonce and ciphertext>", whose plaintext is the field's whole JSON value
// (a string, a map, a list or an object). "enc:v1:<base64>" sealed only string fields, with the one key
// there was; it is still read.
const (
	sealPrefix   = "enc:v2:"
	sealPrefixV1 = "enc:v1:"
)

// sealKey is one key of the ring: the AES-256-GCM key and the HMAC key of the synthetic nonce, both
// derived from the 32-byte secret.
type sealKey struct {
	id     string
	aead   cipher.AEAD
	macKey []byte
}

// sealer encrypts the write-only spec fields of every kind (e.g. kubeconfigs) with AES-256-GCM before
// they reach the database, and decrypts them on the way out. The nonce is synthetic, an HMAC of the
// field and its plaintext, so re-sending an unchanged secret stores the same bytes and does not bump
// the object's generation; it reveals only whether two values are equal.
type sealer struct {
	// keys is the ring: keys[0] seals, every key opens what it sealed.
	keys []*sealKey
}

// SecretKeyID names a sealing key in sealed values and in logs: the first 8 hex digits of a hash of it.
// It reveals nothing about the key.
func SecretKeyID(key []byte) string {
	sum := sha256.Sum256(append([]byte("qleet-kid\x00"), key...))
	return hex.EncodeToString(sum[:4])
}

func newSealKey(key []byte) (*sealKey, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("secret key: want 32 bytes, got %d", len(key))
	}
	encKey := sha256.Sum256(append([]byte("qleet-enc\x00"), key...))
	macKey := sha256.Sum256(append([]byte("qleet-mac\x00"), key...))
	block, err := aes.NewCipher(encKey[:])
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	return &sealKey{id: SecretKeyID(key), aead: aead, macKey: macKey[:]}, nil
}

// newSealer builds a ring from keys; the first one seals.
func newSealer(keys ...[]byte) (*sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("secret key: none given")
	}
	s := &sealer{}
	seen := map[string]bool{}
	for _, k := range keys {
		sk, err := newSealKey(k)
		if err != nil {
			return nil, err
		}
		if seen[sk.id] {
			continue
		}
		seen[sk.id] = true
		s.keys = append(s.keys, sk)
	}
	return s, nil
}

// seal encrypts the JSON value plain of field (e.g. "secret.spec.values") with the primary key.
func (s *sealer) seal(field string, plain []byte) string {
	k := s.keys[0]
	m := hmac.New(sha256.New, k.macKey)
	m.Write([]byte(field + "\x00"))
	m.Write(plain)
	nonce := m.Sum(nil)[:k.aead.NonceSize()]
	ct := k.aead.Seal(nil, nonce, plain, []byte(field))
	return sealPrefix + k.id + ":" + base64.StdEncoding.EncodeToString(append(nonce, ct...))
}

// open decrypts a sealed value of field back to its JSON value.
func (s *sealer) open(field, sealed string) (json.RawMessage, error) {
	if rest, ok := strings.CutPrefix(sealed, sealPrefixV1); ok {
		// v1: the plaintext is the string itself, and the value does not say which key sealed it.
		for _, k := range s.keys {
			if plain, err := k.openData(field, rest); err == nil {
				out, err := json.Marshal(string(plain))
				if err != nil {
					return nil, fmt.Errorf("decrypt %s: %w", field, err)
				}
				return out, nil
			}
		}
		return nil, fmt.Errorf("decrypt %s: no key of the ring opens it (was the secret key changed?)", field)
	}
	rest, ok := strings.CutPrefix(sealed, sealPrefix)
	kid, data, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return nil, fmt.Errorf("decrypt %s: malformed value", field)
	}
	for _, k := range s.keys {
		if k.id != kid {
			continue
		}
		plain, err := k.openData(field, data)
		if err != nil {
			return nil, err
		}
		if !json.Valid(plain) {
			return nil, fmt.Errorf("decrypt %s: the plaintext is not JSON", field)
		}
		return plain, nil
	}
	return nil, fmt.Errorf("decrypt %s: sealed with key %s, which is not in the key ring (was the secret key changed?)", field, kid)
}

func (k *sealKey) openData(field, b64 string) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(b64)
	n := k.aead.NonceSize()
	if err != nil || len(data) < n {
		return nil, fmt.Errorf("decrypt %s: malformed value", field)
	}
	plain, err := k.aead.Open(nil, data[:n], data[n:], []byte(field))
	if err != nil {
		return nil, fmt.Errorf("decrypt %s with key %s: %w (was the secret key changed?)", field, k.id, err)
	}
	return plain, nil
}

// sealedString returns the sealed value a stored field holds, if it holds one.
func sealedString(v json.RawMessage) (string, bool) {
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, strings.HasPrefix(s, sealPrefix) || strings.HasPrefix(s, sealPrefixV1)
}

// emptyJSON says whether a field value holds nothing to seal: null, "", {} or [].
func emptyJSON(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case "", "null", `""`, "{}", "[]":
		return true
	}
	return false
}

// canonical re-encodes a JSON value with sorted object keys and numbers as written, so that an unchanged
// value always seals to the same bytes.
func canonical(v json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return json.Marshal(x)
}

// transform rewrites the write-only fields of a spec with f, whatever their JSON type; empty values are
// left alone. f gets the field's top-level name and its raw JSON value.
func transform(kind string, spec json.RawMessage, f func(name string, v json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	ki, ok := api.LookupKind(kind)
	if !ok || len(ki.WriteOnly) == 0 || len(spec) == 0 {
		return spec, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(spec, &m); err != nil {
		return nil, fmt.Errorf("%s spec: %w", kind, err)
	}
	changed := false
	for _, name := range ki.WriteOnly {
		raw, ok := m[name]
		if !ok || emptyJSON(raw) {
			continue
		}
		out, err := f(name, raw)
		if err != nil {
			return nil, err
		}
		m[name] = out
		changed = true
	}
	if !changed {
		return spec, nil
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s spec: %w", kind, err)
	}
	return out, nil
}

// sealedStore is a store.Store whose write-only spec fields are encrypted at rest.
type sealedStore struct {
	store.Store
	s *sealer
}

func (ss *sealedStore) in(kind string, spec json.RawMessage) (json.RawMessage, error) {
	return transform(kind, spec, func(name string, v json.RawMessage) (json.RawMessage, error) {
		if _, sealed := sealedString(v); sealed {
			return nil, api.Invalid(api.FieldError{Field: "spec." + name, Message: "must not start with enc:v1: or enc:v2:, which mark sealed values"})
		}
		plain, err := canonical(v)
		if err != nil {
			return nil, fmt.Errorf("%s.spec.%s: %w", kind, name, err)
		}
		out, err := json.Marshal(ss.s.seal(kind+".spec."+name, plain))
		if err != nil {
			return nil, fmt.Errorf("%s.spec.%s: %w", kind, name, err)
		}
		return out, nil
	})
}

func (ss *sealedStore) out(o *store.Object, err error) (*store.Object, error) {
	if err != nil || o == nil {
		return o, err
	}
	spec, err := transform(o.Kind, o.Spec, func(name string, v json.RawMessage) (json.RawMessage, error) {
		sealed, ok := sealedString(v)
		if !ok {
			return v, nil // written before encryption was enabled
		}
		return ss.s.open(o.Kind+".spec."+name, sealed)
	})
	if err != nil {
		return nil, err
	}
	cp := *o
	cp.Spec = spec
	return &cp, nil
}

// current says whether every write-only field of a stored object is empty or sealed with the primary key.
func (ss *sealedStore) current(o *store.Object) (bool, error) {
	cur := true
	want := sealPrefix + ss.s.keys[0].id + ":"
	_, err := transform(o.Kind, o.Spec, func(_ string, v json.RawMessage) (json.RawMessage, error) {
		if s, ok := sealedString(v); !ok || !strings.HasPrefix(s, want) {
			cur = false
		}
		return v, nil
	})
	return cur, err
}

func (ss *sealedStore) Create(ctx context.Context, p *store.CreateParams) (*store.Object, error) {
	spec, err := ss.in(p.Kind, p.Spec)
	if err != nil {
		return nil, err
	}
	cp := *p
	cp.Spec = spec
	return ss.out(ss.Store.Create(ctx, &cp))
}

func (ss *sealedStore) UpdateSpec(ctx context.Context, p *store.UpdateSpecParams) (*store.Object, error) {
	spec, err := ss.in(p.Kind, p.Spec)
	if err != nil {
		return nil, err
	}
	cp := *p
	cp.Spec = spec
	return ss.out(ss.Store.UpdateSpec(ctx, &cp))
}

func (ss *sealedStore) Get(ctx context.Context, kind, id string) (*store.Object, error) {
	return ss.out(ss.Store.Get(ctx, kind, id))
}

func (ss *sealedStore) GetByName(ctx context.Context, kind, name string) (*store.Object, error) {
	return ss.out(ss.Store.GetByName(ctx, kind, name))
}

func (ss *sealedStore) UpdateStatus(ctx context.Context, p *store.UpdateStatusParams) (*store.Object, error) {
	return ss.out(ss.Store.UpdateStatus(ctx, p))
}

func (ss *sealedStore) RequestDeletion(ctx context.Context, kind, id string, opts store.DeletionOptions) (*store.Object, error) {
	return ss.out(ss.Store.RequestDeletion(ctx, kind, id, opts))
}

func (ss *sealedStore) List(ctx context.Context, p *store.ListParams) (*store.ListResult, error) {
	res, err := ss.Store.List(ctx, p)
	if err != nil {
		return nil, err
	}
	for i, o := range res.Objects {
		if res.Objects[i], err = ss.out(o, nil); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// checkSealable verifies that every write-only field the kinds declare can be sealed: a top-level JSON
// field of the kind's spec struct, of a type encoding/json encodes. The server refuses to start
// otherwise, rather than store a secret in plain text.
func checkSealable(kinds []*api.KindInfo) error {
	var errs []error
	for _, ki := range kinds {
		if len(ki.WriteOnly) == 0 {
			continue
		}
		t := reflect.TypeOf(ki.SpecType)
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			errs = append(errs, fmt.Errorf("kind %s: write-only fields %v need a struct spec type, not %v", ki.Kind, ki.WriteOnly, t))
			continue
		}
		fields := map[string]reflect.Type{}
		for _, f := range structFields(t) {
			fields[f.name] = f.typ
		}
		seen := map[string]bool{}
		for _, name := range ki.WriteOnly {
			ft, ok := fields[name]
			switch {
			case name == "" || strings.ContainsAny(name, ".[]"):
				errs = append(errs, fmt.Errorf("kind %s: write-only field %q: must be the JSON name of a top-level spec field, not a path", ki.Kind, name))
			case seen[name]:
				errs = append(errs, fmt.Errorf("kind %s: write-only field %q is declared twice", ki.Kind, name))
			case !ok:
				errs = append(errs, fmt.Errorf("kind %s: write-only field %q is not a JSON field of %s, so it could not be sealed", ki.Kind, name, t))
			case !encodable(ft, map[reflect.Type]bool{}):
				errs = append(errs, fmt.Errorf("kind %s: write-only field %q: type %s does not encode to JSON, so it could not be sealed", ki.Kind, name, ft))
			}
			seen[name] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("write-only fields that cannot be sealed at rest: %w", err)
	}
	return nil
}

// encodable says whether encoding/json can encode values of t.
func encodable(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	if t.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Marshaler]()) {
		return true
	}
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return false
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return encodable(t.Elem(), seen)
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		default:
			if !t.Key().Implements(reflect.TypeFor[interface{ MarshalText() ([]byte, error) }]()) {
				return false
			}
		}
		return encodable(t.Elem(), seen)
	case reflect.Struct:
		for _, f := range structFields(t) {
			if !encodable(f.typ, seen) {
				return false
			}
		}
	}
	return true
}

// NewSecretKey returns a new random 32-byte sealing key.
func NewSecretKey() ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	return key, nil
}

// ParseSecretKeys reads a key file: one base64 32-byte key per line, blank lines and lines starting with
// # ignored. The first key seals; every key opens what it sealed. A file with one key is the format of
// releases before key rotation.
func ParseSecretKeys(data []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("line %d: want a 32-byte key in base64", n)
		}
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read keys: %w", err)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	return keys, nil
}

// FormatSecretKeys writes keys in the format ParseSecretKeys reads, the sealing key first.
func FormatSecretKeys(keys [][]byte) []byte {
	var b bytes.Buffer
	if len(keys) > 1 {
		b.WriteString("# The first key seals secrets at rest; every key opens what it sealed (qleet server rotate-keys).\n")
	}
	for _, k := range keys {
		b.WriteString(base64.StdEncoding.EncodeToString(k))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ResealStats count what Reseal did.
type ResealStats struct {
	// Resealed objects had a write-only field in plain text or sealed with another key, and were
	// rewritten sealed with the first key.
	Resealed int
	// Current objects were already sealed with the first key (or had no write-only value).
	Current int
}

// Reseal rewrites every stored object whose write-only fields are not all sealed with keys[0] (plain
// text from before sealing, the v1 format, or another key of the ring), so that the other keys can then
// be dropped. Each rewrite is a spec update with If-Match: it raises the object's generation once (the
// ciphertext changed, the value did not), so its controller reconciles it once. The keys must open every
// stored value. Objects that fail are reported together at the end; the others are resealed anyway.
func Reseal(ctx context.Context, st store.Store, keys [][]byte) (ResealStats, error) {
	var stats ResealStats
	if err := checkSealable(api.Kinds()); err != nil {
		return stats, err
	}
	sl, err := newSealer(keys...)
	if err != nil {
		return stats, err
	}
	ss := &sealedStore{Store: st, s: sl}
	var errs []error
	for _, ki := range api.Kinds() {
		if len(ki.WriteOnly) == 0 {
			continue
		}
		after := ""
		for {
			res, err := st.List(ctx, &store.ListParams{Kind: ki.Kind, Limit: 500, After: after})
			if err != nil {
				return stats, fmt.Errorf("reseal: list %s: %w", ki.Plural, err)
			}
			for _, o := range res.Objects {
				done, err := ss.reseal(ctx, ki, o)
				switch {
				case err != nil:
					errs = append(errs, fmt.Errorf("%s %q: %w", o.Kind, o.Name, err))
				case done:
					stats.Resealed++
				default:
					stats.Current++
				}
			}
			if res.Next == "" {
				break
			}
			after = res.Next
		}
	}
	if err := errors.Join(errs...); err != nil {
		return stats, fmt.Errorf("reseal: %w", err)
	}
	return stats, nil
}

// reseal rewrites one stored object sealed with the primary key, unless it already is; it re-reads the
// object when a concurrent write got in first.
func (ss *sealedStore) reseal(ctx context.Context, ki *api.KindInfo, o *store.Object) (bool, error) {
	for attempt := 0; ; attempt++ {
		cur, err := ss.current(o)
		if err != nil || cur {
			return false, err
		}
		plain, err := ss.out(o, nil)
		if err != nil {
			return false, err
		}
		spec := ki.NewSpec()
		if err := json.Unmarshal(plain.Spec, spec); err != nil {
			return false, fmt.Errorf("decode spec: %w", err)
		}
		var refs []store.Ref
		for _, fr := range ki.Refs(spec) {
			refs = append(refs, store.Ref{Kind: fr.Kind, ID: fr.ID})
		}
		_, err = ss.UpdateSpec(ctx, &store.UpdateSpecParams{
			Kind: o.Kind, ID: o.ID, IfMatch: o.ResourceVersion, Labels: o.Labels, Spec: plain.Spec, Refs: refs,
		})
		switch {
		case errors.Is(err, store.ErrNotFound):
			return false, nil // deleted meanwhile: nothing left to reseal
		case !errors.Is(err, store.ErrStale) || attempt == 4:
			return err == nil, err
		}
		if o, err = ss.Store.Get(ctx, o.Kind, o.ID); errors.Is(err, store.ErrNotFound) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
}
