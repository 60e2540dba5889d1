package api

import (
	"fmt"
	"regexp"
)

// KindDatabase is a database serving a workload instance.
const KindDatabase = "database"

// Database engines.
const (
	// EnginePostgres is PostgreSQL.
	EnginePostgres = "postgres"
	// EngineMySQL is MySQL.
	EngineMySQL = "mysql"
)

// DatabaseSpec is a database for an instance. Off AWS it runs in-cluster (a StatefulSet with a Service, a
// volume and generated credentials) on every runtime the instance runs on; the instance gets the
// connection details as env from a Secret (<PREFIX>_URL and the parts), never through the API or state.
// It has its own lifecycle: it outlives a redeploy of its instance, and Retain keeps its data on delete.
type DatabaseSpec struct {
	// InstanceID is the workload instance it serves, if it names one; instances may also list it in their
	// spec.databases. It runs on every runtime its instances run on.
	InstanceID string `json:"instance_id,omitempty"`
	// Engine is postgres (default) or mysql.
	Engine string `json:"engine,omitempty"`
	// Version is the engine's major version (default 16 for postgres, 8.4 for mysql): one that every
	// provider serves (postgres 13 to 17, mysql 8.0 or 8.4), or a release of it (16.4, 8.0.39).
	Version string `json:"version,omitempty"`
	// Size is the volume size, a Kubernetes quantity (default 1Gi).
	Size string `json:"size,omitempty"`
	// Retain keeps the volume and the credentials when the database is deleted; a database of the same
	// name created later takes them back.
	Retain bool `json:"retain,omitempty"`
	// EnvPrefix prefixes the variables the instance gets (default DATABASE: DATABASE_URL, DATABASE_HOST, ...).
	EnvPrefix string `json:"env_prefix,omitempty"`
}

// DataRuntimeStatus is a database or a bucket on one runtime.
type DataRuntimeStatus struct {
	// RuntimeID is the runtime.
	RuntimeID string `json:"runtime_id"`
	// Runtime is the runtime's name.
	Runtime string `json:"runtime"`
	// Host is the Service address in the cluster.
	Host string `json:"host,omitempty"`
	// Port is its port.
	Port int32 `json:"port,omitempty"`
	// Namespace holds it, its volume and its credentials Secret.
	Namespace string `json:"namespace,omitempty"`
	// Phase is Pending, Reconciling or Ready.
	Phase Phase `json:"phase"`
	// Message explains a phase that is not Ready.
	Message string `json:"message,omitempty"`
	// Objects are the Kubernetes objects applied there.
	Objects []AppliedObject `json:"objects,omitempty"`
	// CloudID names the cloud resource that serves it on an eks runtime: an RDS instance identifier or
	// an S3 bucket name. Empty in-cluster.
	CloudID string `json:"cloud_id,omitempty"`
	// Endpoint is the URL of a bucket served by S3; empty in-cluster.
	Endpoint string `json:"endpoint,omitempty"`
	// Region is the AWS region of a data service served by AWS.
	Region string `json:"region,omitempty"`
}

// DatabaseStatus is the observed state of a database.
type DatabaseStatus struct {
	Status
	// Runtimes is the database on each runtime its instance runs on.
	Runtimes []DataRuntimeStatus `json:"runtimes,omitempty"`
}

// Database is a database for an instance.
type Database = Object[DatabaseSpec, DatabaseStatus]

func defaultDatabase(s *DatabaseSpec) {
	if s.Engine == "" {
		s.Engine = EnginePostgres
	}
	if s.Version == "" {
		s.Version = map[string]string{EnginePostgres: "16", EngineMySQL: "8.4"}[s.Engine]
	}
	if s.Size == "" {
		s.Size = "1Gi"
	}
	if s.EnvPrefix == "" {
		s.EnvPrefix = "DATABASE"
	}
}

func validateDatabase(s *DatabaseSpec) []FieldError {
	var fe fieldErrors
	switch s.Engine {
	case EnginePostgres, EngineMySQL:
	default:
		fe.add("spec.engine", "must be postgres or mysql, not %q", s.Engine)
	}
	if !versionRE.MatchString(s.Version) {
		fe.add("spec.version", "must be a version such as 16 or 8.4, not %q", s.Version)
	} else {
		validateDatabaseVersion(&fe, s.Engine, s.Version)
	}
	if q, err := parseQuantity(s.Size); err != nil || q.sign() <= 0 {
		fe.add("spec.size", "must be a positive Kubernetes quantity such as 1Gi, not %q", s.Size)
	}
	if !envPrefixRE.MatchString(s.EnvPrefix) {
		fe.add("spec.env_prefix", "must be upper case letters, digits and _, starting with a letter, not %q", s.EnvPrefix)
	}
	return fe
}

var versionRE = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,3}){0,2}$`)

// DatabaseURL is the connection string of a database.
func DatabaseURL(scheme, user, password, host string, port int32, name string) string {
	return fmt.Sprintf("%s://%s:%s@%s:%d/%s", scheme, user, password, host, port, name)
}

// KindBucket is an object store bucket serving a workload instance.
const KindBucket = "bucket"

// BucketSpec is an S3-compatible bucket for an instance. Off AWS it is an in-cluster object store (MinIO)
// on every runtime the instance runs on; the instance gets the endpoint, the bucket name and the
// credentials as env from a Secret. Retain keeps its data on delete.
type BucketSpec struct {
	// InstanceID is the workload instance it serves, if it names one; instances may also list it in their
	// spec.buckets. It runs on every runtime its instances run on.
	InstanceID string `json:"instance_id,omitempty"`
	// Size is the volume size, a Kubernetes quantity (default 1Gi).
	Size string `json:"size,omitempty"`
	// Retain keeps the volume and the credentials when the bucket is deleted; a bucket of the same name
	// created later takes them back.
	Retain bool `json:"retain,omitempty"`
	// EnvPrefix prefixes the variables the instance gets (default S3: S3_ENDPOINT, S3_BUCKET, ...).
	EnvPrefix string `json:"env_prefix,omitempty"`
}

// BucketStatus is the observed state of a bucket.
type BucketStatus struct {
	Status
	// Runtimes is the bucket on each runtime its instance runs on.
	Runtimes []DataRuntimeStatus `json:"runtimes,omitempty"`
}

// Bucket is an object store bucket for an instance.
type Bucket = Object[BucketSpec, BucketStatus]

func defaultBucket(s *BucketSpec) {
	if s.Size == "" {
		s.Size = "1Gi"
	}
	if s.EnvPrefix == "" {
		s.EnvPrefix = "S3"
	}
}

func validateBucket(s *BucketSpec) []FieldError {
	var fe fieldErrors
	if q, err := parseQuantity(s.Size); err != nil || q.sign() <= 0 {
		fe.add("spec.size", "must be a positive Kubernetes quantity such as 1Gi, not %q", s.Size)
	}
	if !envPrefixRE.MatchString(s.EnvPrefix) {
		fe.add("spec.env_prefix", "must be upper case letters, digits and _, starting with a letter, not %q", s.EnvPrefix)
	}
	return fe
}

func init() {
	RegisterKind(KindDef[DatabaseSpec, DatabaseStatus]{
		Kind:        KindDatabase,
		Title:       "database",
		ShortNames:  []string{"database", "db"},
		Description: "A database for a workload instance: in-cluster (a StatefulSet with a Service, a volume and generated credentials) on every runtime the instance runs on, or RDS on `eks` runtimes, Ready before the instance rolls out. The instance gets `<PREFIX>_URL`, `_HOST`, `_PORT`, `_NAME`, `_USER` and `_PASSWORD` from a Secret in its namespace; the password never passes through the API. It outlives its instance's redeploys, and `retain` keeps its data on delete.",
		Default:     defaultDatabase,
		Validate:    validateDatabase,
		UsedBy:      func(s *DatabaseSpec) []FieldRef { return attachedTo(s.InstanceID) },
	})
}

func init() {
	RegisterKind(KindDef[BucketSpec, BucketStatus]{
		Kind:        KindBucket,
		Title:       "bucket",
		ShortNames:  []string{"bucket"},
		Description: "An S3-compatible bucket for a workload instance: an in-cluster object store on every runtime the instance runs on, or S3 on `eks` runtimes, Ready before the instance rolls out. The instance gets `<PREFIX>_ENDPOINT`, `_BUCKET`, `_REGION`, `_ACCESS_KEY_ID` and `_SECRET_ACCESS_KEY` from a Secret in its namespace; the keys never pass through the API. `retain` keeps its data on delete.",
		Default:     defaultBucket,
		Validate:    validateBucket,
		UsedBy:      func(s *BucketSpec) []FieldRef { return attachedTo(s.InstanceID) },
	})
}
