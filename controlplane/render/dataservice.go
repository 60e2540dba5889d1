package render

import "github.com/qleetos/terraform-provider-qleet/api"

// Where and how the in-cluster data services run: names and images that the controllers share (the
// database and bucket controller makes them, the runtime controller looks for them when it reclaims, the
// instance controller reads their credentials).

// DatabaseEngine is how an engine runs in a cluster.
type DatabaseEngine struct {
	// Image is the container image, with the version as tag.
	Image string
	// Port is the port it listens on.
	Port int32
	// Scheme is the URL scheme of the connection string.
	Scheme string
	// DataDir is where it keeps its data.
	DataDir string
}

// EngineOf returns how a database's engine runs.
func EngineOf(s *api.DatabaseSpec) DatabaseEngine {
	if s.Engine == api.EngineMySQL {
		return DatabaseEngine{Image: "mysql:" + s.Version, Port: 3306, Scheme: "mysql", DataDir: "/var/lib/mysql"}
	}
	return DatabaseEngine{Image: "postgres:" + s.Version, Port: 5432, Scheme: "postgres", DataDir: "/var/lib/postgresql/data"}
}

// DatabaseCredentialsSecret is the Secret in a database's namespace that holds its username, password
// and database name.
const DatabaseCredentialsSecret = "credentials"

// AccessCredentialsSecret is the copy of a data service's credentials on a runtime that is not its home,
// beside the alias Service (AccessService) that reaches the home.
const AccessCredentialsSecret = "credentials-home"

// AccessService is the alias Service, on a runtime that is not a data service's home, that reaches the
// home; ExposeService is the LoadBalancer Service on the home that the other runtimes reach.
const (
	AccessService = "db-home"
	ExposeService = "db-remote"
)

// ReadService is a database's read replicas (a StatefulSet and its Service) on the runtime that runs them
// for its region; ReplicaHBA is the ConfigMap of the home's client authentication that lets them stream.
const (
	ReadService = "db-read"
	ReplicaHBA  = "db-hba"
)

// CredentialsSecretFor is the Secret that holds a data service's credentials on a runtime of the role.
func CredentialsSecretFor(role string) string {
	if role == api.DataRoleAccess {
		return AccessCredentialsSecret
	}
	return DatabaseCredentialsSecret
}

// DatabaseNamespace is the namespace a database lives in on each runtime.
func DatabaseNamespace(name string) string { return "qleet-db-" + name }

// The in-cluster object store buckets run.
const (
	// BucketImage is the S3-compatible server.
	BucketImage = "quay.io/minio/minio:RELEASE.2024-11-07T00-52-20Z"
	// BucketPort is its port.
	BucketPort = 9000
)

// BucketNamespace is the namespace a bucket lives in on each runtime.
func BucketNamespace(name string) string { return "qleet-bucket-" + name }
