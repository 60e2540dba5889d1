package api

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// KindSecret is secret values for workload instances.
const KindSecret = "secret"

// MaxSecretBytes bounds the total size of a secret's values (a Kubernetes Secret holds at most 1 MiB).
const MaxSecretBytes = 512 << 10

// SecretSpec holds write-only values and the instances they serve. Each instance gets them as a
// Kubernetes Secret in its namespace on every runtime it runs on, as environment variables (one per key)
// or as files under MountPath; a change of the values rolls the instance's pods.
type SecretSpec struct {
	// InstanceIDs are the workload instances the values serve.
	InstanceIDs []string `json:"instance_ids" ref:"workload_instance,usedby"`
	// Values are the secret values by key. Write-only: encrypted at rest and returned only to controllers.
	Values map[string]string `json:"values,omitempty"`
	// MountPath, when set, mounts the values as files (one per key) in every container instead of env.
	MountPath string `json:"mount_path,omitempty"`
}

// SecretStatus is the observed state of a secret.
type SecretStatus struct {
	Status
	// Keys are the keys of the values (never the values).
	Keys []string `json:"keys,omitempty"`
	// Instances counts the named instances that exist.
	Instances int `json:"instances"`
}

// Secret holds secret values for instances.
type Secret = Object[SecretSpec, SecretStatus]

// Use is another instance an instance uses: it is rolled out first, and the user gets
// <PREFIX>_HOST, <PREFIX>_PORT and <PREFIX>_URL pointing at it.
type Use struct {
	// InstanceID is the used workload instance.
	InstanceID string `json:"instance_id"`
	// EnvPrefix prefixes the variables, e.g. "RPC" for RPC_HOST, RPC_PORT and RPC_URL.
	EnvPrefix string `json:"env_prefix"`
	// Placement says where the used instance runs: "own" (default: where its own spec places it) or
	// "with_consumers" (also on every runtime where this instance runs, rolled out there first, and
	// removed from a runtime when no consumer is left there).
	Placement string `json:"placement,omitempty"`
}

// Placements of a used instance (Use.Placement).
const (
	// UseOwnPlacement leaves the used instance where its own spec places it.
	UseOwnPlacement = "own"
	// UseWithConsumers places the used instance on every runtime where its consumers run.
	UseWithConsumers = "with_consumers"
)

var (
	envKeyRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	envPrefixRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

func validateSecret(s *SecretSpec) []FieldError {
	var fe fieldErrors
	if len(s.InstanceIDs) == 0 {
		fe.add("spec.instance_ids", "needs at least one instance")
	}
	seen := map[string]bool{}
	for i, id := range s.InstanceIDs {
		if id == "" || seen[id] {
			fe.add(fmt.Sprintf("spec.instance_ids[%d]", i), "must be a distinct, non-empty instance id")
		}
		seen[id] = true
	}
	if len(s.Values) == 0 {
		fe.add("spec.values", "needs at least one value")
	}
	total := 0
	for _, k := range sortedKeys(s.Values) {
		total += len(k) + len(s.Values[k])
		if !envKeyRE.MatchString(k) || len(k) > 253 {
			fe.add(fmt.Sprintf("spec.values[%q]", k), "key must be an environment variable name (letters, digits, _; not starting with a digit)")
		}
	}
	if total > MaxSecretBytes {
		fe.add("spec.values", "at most %d bytes of keys and values are allowed (got %d)", MaxSecretBytes, total)
	}
	if m := s.MountPath; m != "" && (!strings.HasPrefix(m, "/") || path.Clean(m) != m || m == "/") {
		fe.add("spec.mount_path", "must be a clean absolute path other than /, not %q", m)
	}
	return fe
}

func validateUses(fe *fieldErrors, uses []Use) {
	seen := map[string]bool{}
	prefixes := map[string]bool{}
	for i, u := range uses {
		p := fmt.Sprintf("spec.uses[%d]", i)
		if u.InstanceID == "" {
			fe.add(p+".instance_id", "is required")
		} else if seen[u.InstanceID] {
			fe.add(p+".instance_id", "uses the same instance twice")
		}
		seen[u.InstanceID] = true
		if !envPrefixRE.MatchString(u.EnvPrefix) {
			fe.add(p+".env_prefix", "must be upper case letters, digits and _, starting with a letter, e.g. RPC; not %q", u.EnvPrefix)
		} else if prefixes[u.EnvPrefix] {
			fe.add(p+".env_prefix", "prefix %q is given twice", u.EnvPrefix)
		}
		prefixes[u.EnvPrefix] = true
		switch u.Placement {
		case "", UseOwnPlacement, UseWithConsumers:
		default:
			fe.add(p+".placement", "must be %q or %q, not %q", UseOwnPlacement, UseWithConsumers, u.Placement)
		}
	}
}

func init() {
	RegisterKind(KindDef[SecretSpec, SecretStatus]{
		Kind:        KindSecret,
		Title:       "secret",
		ShortNames:  []string{"secret"},
		Description: "Secret values for workload instances, delivered as a Kubernetes Secret in each instance's namespace on every runtime it runs on, as environment variables (one per key) or as files under `mount_path`. A change of the values rolls the instances' pods, and no copy of an old value stays in any cluster. The values are write-only: encrypted at rest, returned to controllers only, never logged.",
		Validate:    validateSecret,
		WriteOnly:   []string{"values"},
	})
}
