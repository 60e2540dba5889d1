package api_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// check defaults and validates a spec of a kind, returning the errors by field.
func check(t *testing.T, kind string, spec any) map[string]string {
	t.Helper()
	ki, ok := api.LookupKind(kind)
	require.True(t, ok)
	ki.Default(spec)
	return fieldsOf(ki.Validate(spec))
}

func TestValidateLayerKinds(t *testing.T) {
	t.Parallel()
	no := true
	t.Run("gateway", func(t *testing.T) {
		require.Empty(t, check(t, api.KindGateway, &api.GatewaySpec{InstanceID: "i", Hosts: []string{"app.example.com"}}))
		errs := check(t, api.KindGateway, &api.GatewaySpec{Hosts: []string{"Bad_Host", "a.example.com", "a.example.com"}, Paths: []string{"api", "/a b"}, Port: 70000})
		require.Contains(t, errs["spec.instance_id"], "required")
		require.Contains(t, errs["spec.hosts[0]"], "subdomain")
		require.Contains(t, errs["spec.hosts[2]"], "duplicate host")
		require.Contains(t, errs["spec.paths[0]"], "starting with /")
		require.Contains(t, errs["spec.paths[1]"], "without spaces")
		require.Contains(t, errs["spec.port"], "between 1 and 65535")
		require.Contains(t, check(t, api.KindGateway, &api.GatewaySpec{InstanceID: "i", TLS: &no})["spec.tls"], "needs at least one host")
		s := &api.GatewaySpec{InstanceID: "i"}
		check(t, api.KindGateway, s)
		require.Equal(t, []string{"/"}, s.Paths, "paths default to /")
		require.False(t, s.TLSOn(), "no host, no TLS")
	})
	t.Run("support service", func(t *testing.T) {
		require.Empty(t, check(t, api.KindSupportService, &api.SupportServiceSpec{RuntimeID: "r", Type: api.SupportIngress}))
		errs := check(t, api.KindSupportService, &api.SupportServiceSpec{Type: "nginx", Repository: "ftp://x", Values: "- a list"})
		require.Contains(t, errs["spec.runtime_id"], "required")
		require.Contains(t, errs["spec.type"], `not "nginx"`)
		require.Contains(t, errs["spec.repository"], "http, https or oci")
		require.Contains(t, errs["spec.values"], "YAML mapping")
	})
	t.Run("domain name", func(t *testing.T) {
		require.Empty(t, check(t, api.KindDomainName, &api.DomainNameSpec{Zone: "example.com"}))
		require.Empty(t, check(t, api.KindDomainName, &api.DomainNameSpec{Zone: "example.com", Provider: "route53"}))
		require.Contains(t, check(t, api.KindDomainName, &api.DomainNameSpec{Zone: "example.com", Provider: "cloudflare"})["spec.provider"], "none or route53")
		require.Contains(t, check(t, api.KindDomainName, &api.DomainNameSpec{Zone: "Not A Zone"})["spec.zone"], "subdomain")
		ki, _ := api.LookupKind(api.KindDomainName)
		errs := fieldsOf(ki.ValidatePeers(&api.DomainNameSpec{Zone: "Example.com."}, []api.NamedSpec{{Name: "ex", Spec: &api.DomainNameSpec{Zone: "example.com"}}}))
		require.Contains(t, errs["spec.zone"], `already held by domain_name "ex"`)
		require.True(t, api.InZone("app.example.com", "example.com"))
		require.True(t, api.InZone("example.com.", "example.com"))
		require.False(t, api.InZone("badexample.com", "example.com"))
	})
	t.Run("secret", func(t *testing.T) {
		require.Empty(t, check(t, api.KindSecret, &api.SecretSpec{InstanceIDs: []string{"i"}, Values: map[string]string{"API_KEY": "x"}}))
		errs := check(t, api.KindSecret, &api.SecretSpec{InstanceIDs: []string{"i", "i"}, Values: map[string]string{"1bad": "x"}, MountPath: "relative"})
		require.Contains(t, errs["spec.instance_ids[1]"], "distinct")
		require.Contains(t, errs[`spec.values["1bad"]`], "environment variable name")
		require.Contains(t, errs["spec.mount_path"], "absolute path")
		require.Contains(t, check(t, api.KindSecret, &api.SecretSpec{InstanceIDs: []string{"i"}, Values: map[string]string{"A": strings.Repeat("x", api.MaxSecretBytes)}})["spec.values"], "at most")
		require.Contains(t, check(t, api.KindSecret, &api.SecretSpec{})["spec.values"], "at least one value")
		ki, _ := api.LookupKind(api.KindSecret)
		require.Equal(t, []string{"values"}, ki.WriteOnly)
	})
	t.Run("database and bucket", func(t *testing.T) {
		db := &api.DatabaseSpec{}
		require.Empty(t, check(t, api.KindDatabase, db))
		require.Equal(t, api.DatabaseSpec{Engine: "postgres", Version: "16", Size: "1Gi", EnvPrefix: "DATABASE"}, *db)
		my := &api.DatabaseSpec{Engine: "mysql"}
		check(t, api.KindDatabase, my)
		require.Equal(t, "8.4", my.Version)
		errs := check(t, api.KindDatabase, &api.DatabaseSpec{Engine: "oracle", Version: "latest", Size: "-1Gi", EnvPrefix: "db"})
		require.Contains(t, errs["spec.engine"], `not "oracle"`)
		require.Contains(t, errs["spec.version"], `not "latest"`)
		require.Contains(t, errs["spec.size"], "positive")
		require.Contains(t, errs["spec.env_prefix"], "upper case")
		errs = check(t, api.KindDatabase, &api.DatabaseSpec{RuntimeID: "r", Region: "eu-west"})
		require.Contains(t, errs["spec.region"], "must not be set with spec.runtime_id")
		require.Contains(t, check(t, api.KindBucket, &api.BucketSpec{Region: "EU West"})["spec.region"], "lower case")
		ki, _ := api.LookupKind(api.KindDatabase)
		require.Equal(t, []api.FieldRef{{Field: "spec.runtime_id", Kind: api.KindKubernetesRuntime, ID: "r"}}, ki.Refs(&api.DatabaseSpec{RuntimeID: "r"}))
		b := &api.BucketSpec{}
		require.Empty(t, check(t, api.KindBucket, b))
		require.Equal(t, "S3", b.EnvPrefix)
		require.Contains(t, check(t, api.KindBucket, &api.BucketSpec{Size: "lots"})["spec.size"], "quantity")
	})
	t.Run("uses, databases and buckets on an instance", func(t *testing.T) {
		errs := check(t, api.KindWorkloadInstance, &api.WorkloadInstanceSpec{DefinitionID: "d", RuntimeID: "r",
			Uses: []api.Use{{InstanceID: "a", EnvPrefix: "RPC"}, {InstanceID: "a", EnvPrefix: "RPC"}, {EnvPrefix: "rpc"}}})
		require.Contains(t, errs["spec.uses[1].instance_id"], "same instance twice")
		require.Contains(t, errs["spec.uses[1].env_prefix"], "given twice")
		require.Contains(t, errs["spec.uses[2].instance_id"], "required")
		require.Contains(t, errs["spec.uses[2].env_prefix"], "upper case")
		ki, _ := api.LookupKind(api.KindWorkloadInstance)
		refs := ki.Refs(&api.WorkloadInstanceSpec{DefinitionID: "d", RuntimeID: "r", Uses: []api.Use{{InstanceID: "u", EnvPrefix: "U"}},
			Databases: []string{"db"}, Buckets: []string{"b"}})
		require.Contains(t, refs, api.FieldRef{Field: "spec.uses[0].instance_id", Kind: api.KindWorkloadInstance, ID: "u"})
		require.Contains(t, refs, api.FieldRef{Field: "spec.databases[0]", Kind: api.KindDatabase, ID: "db"})
		require.Contains(t, refs, api.FieldRef{Field: "spec.buckets[0]", Kind: api.KindBucket, ID: "b"})
	})
}
