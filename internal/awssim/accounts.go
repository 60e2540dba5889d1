package awssim

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Account is an AWS account of the stand-in with the long-term access key
// of its user "admin", who may do everything unless a Fault says otherwise.
type Account struct {
	// ID is the 12-digit account ID.
	ID string `json:"id"`
	// AccessKeyID is the admin user's access key ID (AKIA...).
	AccessKeyID string `json:"access_key_id"`
	// SecretAccessKey is the admin user's secret access key.
	SecretAccessKey string `json:"secret_access_key"`
	// ARN is the admin user's ARN, arn:aws:iam::<ID>:user/admin.
	ARN string `json:"arn"`
}

// Credentials are an access key as an SDK takes it.
type Credentials struct {
	// AccessKeyID is the access key ID (AKIA... long-term, ASIA... temporary).
	AccessKeyID string `json:"access_key_id"`
	// SecretAccessKey is the secret.
	SecretAccessKey string `json:"secret_access_key"`
	// SessionToken is set for temporary credentials only.
	SessionToken string `json:"session_token,omitempty"`
	// ARN is the principal the key belongs to.
	ARN string `json:"arn"`
}

// credential is what the stand-in knows of one access key.
type credential struct {
	Credentials
	account string
	userID  string    // GetCallerIdentity's UserId
	expires time.Time // zero: long-term
}

// AddAccount adds an account and its admin user's access key. id must be 12
// digits, or empty for a generated one. Adding an existing id returns it as
// it is.
func (s *Sim) AddAccount(id string) (Account, error) {
	return s.AddAccountWithKey(id, "", "")
}

// AddAccountWithKey is AddAccount with a chosen access key for the admin
// user (for reproducible demos): accessKeyID must start with AKIA and be 16
// to 128 characters; empty ones are generated.
func (s *Sim) AddAccountWithKey(id, accessKeyID, secretAccessKey string) (Account, error) {
	if accessKeyID != "" && (!strings.HasPrefix(accessKeyID, "AKIA") || len(accessKeyID) < 16 || len(accessKeyID) > 128 || secretAccessKey == "") {
		return Account{}, fmt.Errorf("awssim: access key id %q: want AKIA..., 16 to 128 characters, with a secret", accessKeyID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if accessKeyID != "" && s.keys[accessKeyID] != nil {
		return Account{}, fmt.Errorf("awssim: access key id %q is taken", accessKeyID)
	}
	if id == "" {
		for id == "" || s.accounts[id] != nil {
			id = fmt.Sprintf("%012d", 100000000000+s.nextID()*1111)
		}
	}
	if len(id) != 12 || strings.Trim(id, "0123456789") != "" {
		return Account{}, fmt.Errorf("awssim: account id %q: want 12 digits", id)
	}
	if a := s.accounts[id]; a != nil {
		return *a, nil
	}
	c := s.newKeyLocked(id, "user", "admin")
	if accessKeyID != "" {
		delete(s.keys, c.AccessKeyID)
		c.AccessKeyID, c.SecretAccessKey = accessKeyID, secretAccessKey
		s.keys[accessKeyID] = c
	}
	a := &Account{ID: id, AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, ARN: c.ARN}
	s.accounts[id] = a
	return *a, nil
}

// AddUser adds an IAM user with a long-term access key to an existing
// account, for tests that need a second principal.
func (s *Sim) AddUser(accountID, name string) (Credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accounts[accountID] == nil {
		return Credentials{}, fmt.Errorf("awssim: no account %q", accountID)
	}
	return s.newKeyLocked(accountID, "user", name).Credentials, nil
}

func (s *Sim) newKeyLocked(account, kind, name string) *credential {
	c := &credential{
		Credentials: Credentials{
			AccessKeyID:     "AKIA" + randomString(16, upperDigits),
			SecretAccessKey: randomString(40, secretChars),
			ARN:             fmt.Sprintf("arn:aws:iam::%s:%s/%s", account, kind, name),
		},
		account: account,
		userID:  "AIDA" + randomString(17, upperDigits),
	}
	s.keys[c.AccessKeyID] = c
	return c
}

// newSessionLocked makes temporary credentials for an assumed role.
func (s *Sim) newSessionLocked(account, roleName, roleID, session string, d time.Duration) *credential {
	c := &credential{
		Credentials: Credentials{
			AccessKeyID:     "ASIA" + randomString(16, upperDigits),
			SecretAccessKey: randomString(40, secretChars),
			SessionToken:    "FQoGZXIvYXdzE" + randomString(120, secretChars),
			ARN:             fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", account, roleName, session),
		},
		account: account,
		userID:  roleID + ":" + session,
		expires: s.now().Add(d),
	}
	s.keys[c.AccessKeyID] = c
	return c
}

const (
	upperDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	secretChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	lowerHex    = "0123456789abcdef"
)

func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	max := big.NewInt(int64(len(alphabet)))
	for i := range b {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b)
}
