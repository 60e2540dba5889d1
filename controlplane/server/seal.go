package server

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// sealPrefix marks an encrypted field value in the stored spec.
const sealPrefix = "enc:v1:"

// sealer encrypts the write-only spec fields of every kind (e.g. kubeconfigs) with AES-256-GCM before
// they reach the database, and decrypts them on the way out. The nonce is synthetic, an HMAC of the
// field and its plaintext, so re-sending an unchanged secret stores the same bytes and does not bump
// the object's generation; it reveals only whether two values are equal.
type sealer struct {
	aead   cipher.AEAD
	macKey []byte
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("secret key: want 32 bytes, got %d", len(key))
	}
	encKey := sha256.Sum256(append([]byte("qleet-enc\x00"), key...))
	macKey := sha256.Sum256(append([]byte("qleet-mac\x00"), key...))
	block, err := aes.NewCipher(encKey[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead, macKey: macKey[:]}, nil
}

func (s *sealer) seal(field, plain string) string {
	m := hmac.New(sha256.New, s.macKey)
	m.Write([]byte(field + "\x00" + plain))
	nonce := m.Sum(nil)[:s.aead.NonceSize()]
	ct := s.aead.Seal(nil, nonce, []byte(plain), []byte(field))
	return sealPrefix + base64.StdEncoding.EncodeToString(append(nonce, ct...))
}

func (s *sealer) open(field, sealed string) (string, error) {
	data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, sealPrefix))
	if err != nil || len(data) < s.aead.NonceSize() {
		return "", fmt.Errorf("decrypt %s: malformed value", field)
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, data[:n], data[n:], []byte(field))
	if err != nil {
		return "", fmt.Errorf("decrypt %s: %w (was the secret key changed?)", field, err)
	}
	return string(plain), nil
}

// transform rewrites the write-only string fields of a spec with f.
func transform(kind string, spec json.RawMessage, f func(field, v string) (string, error)) (json.RawMessage, error) {
	ki, ok := client.LookupKind(kind)
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
		if !ok {
			continue
		}
		var v string
		if json.Unmarshal(raw, &v) != nil || v == "" {
			continue
		}
		out, err := f(kind+".spec."+name, v)
		if err != nil {
			return nil, err
		}
		if m[name], err = json.Marshal(out); err != nil {
			return nil, err
		}
		changed = true
	}
	if !changed {
		return spec, nil
	}
	return json.Marshal(m)
}

// sealedStore is a store.Store whose write-only spec fields are encrypted at rest.
type sealedStore struct {
	store.Store
	s *sealer
}

func (ss *sealedStore) in(kind string, spec json.RawMessage) (json.RawMessage, error) {
	return transform(kind, spec, func(field, v string) (string, error) {
		if strings.HasPrefix(v, sealPrefix) {
			return "", errors.New(field + ": value must not start with " + sealPrefix)
		}
		return ss.s.seal(field, v), nil
	})
}

func (ss *sealedStore) out(o *store.Object, err error) (*store.Object, error) {
	if err != nil || o == nil {
		return o, err
	}
	spec, err := transform(o.Kind, o.Spec, func(field, v string) (string, error) {
		if !strings.HasPrefix(v, sealPrefix) {
			return v, nil // written before encryption was enabled
		}
		return ss.s.open(field, v)
	})
	if err != nil {
		return nil, err
	}
	cp := *o
	cp.Spec = spec
	return &cp, nil
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
