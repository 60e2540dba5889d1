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

// DatabaseSpec is a database for an instance. It has one home: a runtime where it runs (off AWS in-cluster,
// a StatefulSet with a Service, a volume and generated credentials; on an eks runtime an RDS instance in
// that runtime's region). Every consumer, on any runtime in any region, is given that one database: on
// other runtimes QleetOS puts an alias Service and a copy of the credentials beside it. The instance gets
// the connection details as env from a Secret (<PREFIX>_URL and the parts), never through the API or
// state. It has its own lifecycle: it outlives a redeploy of its instance, and Retain keeps its data on
// delete.
type DatabaseSpec struct {
	// InstanceID is the workload instance it serves, if it names one; instances may also list it in their
	// spec.databases.
	InstanceID string `json:"instance_id,omitempty"`
	// RuntimeID pins its home to a runtime. At most one of RuntimeID and Region is set.
	RuntimeID string `json:"runtime_id,omitempty"`
	// Region is its home region: it runs on a runtime there, a consumer's if one runs there. The default
	// is the primary region of its first consumer. The home never moves once it holds data.
	Region string `json:"region,omitempty"`
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
	// ReplicasPerRegion is the number of read replicas (0 to 5, default 0; postgres only) in each region
	// where a consumer runs. In a region they run on the first runtime there that a consumer runs on (the
	// home, if a consumer runs on it), streaming from the home; on an eks runtime whose home is RDS they
	// are RDS read replicas in that region. The consumers there get <PREFIX>_READ_URL, _READ_HOST and
	// _READ_PORT for them; elsewhere those name the home, so that an application can always send its
	// reads to _READ_URL. Writes always go to the home.
	ReplicasPerRegion int `json:"replicas_per_region,omitempty"`
}

// MaxReplicasPerRegion bounds DatabaseSpec.ReplicasPerRegion.
const MaxReplicasPerRegion = 5

// Roles of a data service on a runtime.
const (
	// DataRoleHome is the one runtime where the data service runs and keeps its data.
	DataRoleHome = "home"
	// DataRoleAccess gives the consumers on a runtime the home: an alias Service that reaches it and a
	// copy of its credentials; no data is there.
	DataRoleAccess = "access"
)

// DataHome is where a data service's data lives.
type DataHome struct {
	// RuntimeID is the home runtime.
	RuntimeID string `json:"runtime_id"`
	// Runtime is its name.
	Runtime string `json:"runtime"`
	// Region is its region.
	Region string `json:"region,omitempty"`
	// Reason says why it is there: spec.runtime_id, spec.region, the first consumer's primary region, or
	// the copy that held data when the data service got one home.
	Reason string `json:"reason"`
	// Address is where the other runtimes reach it (a load balancer's address off AWS, the RDS or S3
	// endpoint on AWS); empty while no other runtime needs it.
	Address string `json:"address,omitempty"`
}

// DataRuntimeStatus is a database or a bucket on one runtime.
type DataRuntimeStatus struct {
	// RuntimeID is the runtime.
	RuntimeID string `json:"runtime_id"`
	// Runtime is the runtime's name.
	Runtime string `json:"runtime"`
	// Role is home (it runs and keeps its data there) or access (consumers there reach the home through
	// an alias Service).
	Role string `json:"role,omitempty"`
	// Copy says that the runtime also holds a separate copy of the data from before the data service had
	// one home: kept as it was, given to no consumer, deleted (or retained) with the data service.
	Copy bool `json:"copy,omitempty"`
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
	CloudID string `json:"cloud_id,omitempty" ref:"-"`
	// Endpoint is the URL of a bucket served by S3; empty in-cluster.
	Endpoint string `json:"endpoint,omitempty"`
	// Region is the AWS region of a data service served by AWS.
	Region string `json:"region,omitempty"`
	// Replicas is the number of a database's read replicas that run for this runtime's region here (on
	// an eks runtime, RDS read replicas in its region); 0 where none do.
	Replicas int `json:"replicas,omitempty"`
	// ReadHost is the address the consumers on this runtime read from: the read replicas' Service (or the
	// first RDS read replica's endpoint) where Replicas is set, else empty (they read from Host).
	ReadHost string `json:"read_host,omitempty"`
	// ReplicaCloudIDs name the RDS read replicas on an eks runtime.
	ReplicaCloudIDs []string `json:"replica_cloud_ids,omitempty" ref:"-"`
}

// DatabaseStatus is the observed state of a database.
type DatabaseStatus struct {
	Status
	// Home is where its data lives; empty until its first consumer is placed.
	Home *DataHome `json:"home,omitempty"`
	// Runtimes is the database on each runtime: its home, and every runtime its consumers run on.
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
	validateHome(&fe, s.RuntimeID, s.Region)
	switch {
	case s.ReplicasPerRegion < 0 || s.ReplicasPerRegion > MaxReplicasPerRegion:
		fe.add("spec.replicas_per_region", "must be between 0 and %d, not %d", MaxReplicasPerRegion, s.ReplicasPerRegion)
	case s.ReplicasPerRegion > 0 && s.Engine != EnginePostgres:
		fe.add("spec.replicas_per_region", "must be 0 for %s: QleetOS runs read replicas of postgres only", s.Engine)
	}
	return fe
}

// validateHome checks a data service's home: a runtime or a region, not both.
func validateHome(fe *fieldErrors, runtimeID, region string) {
	if runtimeID != "" && region != "" {
		fe.add("spec.region", "must not be set with spec.runtime_id (a pinned home); set one of them")
	}
	if region != "" {
		fe.msgs("spec.region", isDNS1123Label(region))
	}
}

func dataServiceRefs(runtimeID string) []FieldRef {
	if runtimeID == "" {
		return nil
	}
	return []FieldRef{{Field: "spec.runtime_id", Kind: KindKubernetesRuntime, ID: runtimeID}}
}

var versionRE = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,3}){0,2}$`)

// DatabaseURL is the connection string of a database.
func DatabaseURL(scheme, user, password, host string, port int32, name string) string {
	return fmt.Sprintf("%s://%s:%s@%s:%d/%s", scheme, user, password, host, port, name)
}

// KindBucket is an object store bucket serving a workload instance.
const KindBucket = "bucket"

// BucketSpec is an S3-compatible bucket for an instance. It has one home, like a database: off AWS an
// in-cluster object store (MinIO) on one runtime, on an eks runtime an S3 bucket in its region; every
// consumer in any region is given that one bucket. The instance gets the endpoint, the bucket name and
// the credentials as env from a Secret. Retain keeps its data on delete.
type BucketSpec struct {
	// InstanceID is the workload instance it serves, if it names one; instances may also list it in their
	// spec.buckets.
	InstanceID string `json:"instance_id,omitempty"`
	// RuntimeID pins its home to a runtime. At most one of RuntimeID and Region is set.
	RuntimeID string `json:"runtime_id,omitempty"`
	// Region is its home region, as a database's (default: the primary region of its first consumer).
	Region string `json:"region,omitempty"`
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
	// Home is where its data lives; empty until its first consumer is placed.
	Home *DataHome `json:"home,omitempty"`
	// Runtimes is the bucket on each runtime: its home, and every runtime its consumers run on.
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
	validateHome(&fe, s.RuntimeID, s.Region)
	return fe
}

func init() {
	RegisterKind(KindDef[DatabaseSpec, DatabaseStatus]{
		Kind:        KindDatabase,
		Title:       "database",
		ShortNames:  []string{"database", "db"},
		Description: "A database for a workload instance: with one home (a `runtime_id` or a `region`; by default the primary region of its first consumer): in-cluster (a StatefulSet with a Service, a volume and generated credentials), or RDS on an `eks` home. Every consumer in any region is given that one database. It is Ready before its consumers roll out. The instance gets `<PREFIX>_URL`, `_HOST`, `_PORT`, `_NAME`, `_USER` and `_PASSWORD` from a Secret in its namespace; the password never passes through the API. It outlives its instance's redeploys, and `retain` keeps its data on delete.",
		Default:     defaultDatabase,
		Validate:    validateDatabase,
		Refs:        func(s *DatabaseSpec) []FieldRef { return dataServiceRefs(s.RuntimeID) },
		UsedBy:      func(s *DatabaseSpec) []FieldRef { return attachedTo(s.InstanceID) },
	})
}

func init() {
	RegisterKind(KindDef[BucketSpec, BucketStatus]{
		Kind:        KindBucket,
		Title:       "bucket",
		ShortNames:  []string{"bucket"},
		Description: "An S3-compatible bucket for a workload instance, with one home like a database: an in-cluster object store, or S3 on an `eks` home. Every consumer in any region is given that one bucket. It is Ready before its consumers roll out. The instance gets `<PREFIX>_ENDPOINT`, `_BUCKET`, `_REGION`, `_ACCESS_KEY_ID` and `_SECRET_ACCESS_KEY` from a Secret in its namespace; the keys never pass through the API. `retain` keeps its data on delete.",
		Default:     defaultBucket,
		Validate:    validateBucket,
		Refs:        func(s *BucketSpec) []FieldRef { return dataServiceRefs(s.RuntimeID) },
		UsedBy:      func(s *BucketSpec) []FieldRef { return attachedTo(s.InstanceID) },
	})
}
