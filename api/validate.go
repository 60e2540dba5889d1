package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/distribution/reference"
	"sigs.k8s.io/yaml"
)

// fieldErrors collects validation errors.
type fieldErrors []FieldError

func (fe *fieldErrors) add(field, format string, args ...any) {
	*fe = append(*fe, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (fe *fieldErrors) msgs(field string, msgs []string) {
	for _, m := range msgs {
		fe.add(field, "%s", m)
	}
}

// Size limits of what the API accepts. Each error that enforces one names the limit.
const (
	// MaxLabels is the most labels an object may carry.
	MaxLabels = 64
	// MaxEnv is the most environment variables in one list (a container's, or an instance's overrides).
	MaxEnv = 256
	// MaxEnvValueBytes is the longest value of one environment variable.
	MaxEnvValueBytes = 32 << 10
	// MaxContainers is the most containers in one definition.
	MaxContainers = 32
	// MaxDocumentBytes is the largest manifests document, or Helm values document.
	MaxDocumentBytes = 512 << 10
	// MaxReplicas is the most replicas a definition, an instance or an autoscaler may ask for, whoever
	// asks. An operator may set lower limits per role (the server's --max-replicas).
	MaxReplicas = 1000
)

// ValidateMeta checks an object's name (a DNS-1123 label) and labels (Kubernetes label syntax).
func ValidateMeta(name string, labels map[string]string) []FieldError {
	var fe fieldErrors
	if name == "" {
		fe.add("name", "is required")
	} else {
		fe.msgs("name", isDNS1123Label(name))
	}
	if len(labels) > MaxLabels {
		fe.add("labels", "at most %d labels are allowed (got %d)", MaxLabels, len(labels))
		return fe
	}
	for _, k := range sortedKeys(labels) {
		path := fmt.Sprintf("labels[%q]", k)
		fe.msgs(path, prefix("key: ", isQualifiedName(k)))
		fe.msgs(path, prefix("value: ", isValidLabelValue(labels[k])))
	}
	return fe
}

// ValidateImage checks an OCI image reference such as "nginx:1.27" or "ghcr.io/org/app@sha256:...".
func ValidateImage(image string) error {
	if image == "" {
		return errors.New("is required")
	}
	if strings.TrimSpace(image) != image {
		return errors.New("must not contain whitespace")
	}
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return fmt.Errorf("is not a valid image reference: %w", err)
	}
	return nil
}

func prefix(p string, msgs []string) []string {
	for i := range msgs {
		msgs[i] = p + msgs[i]
	}
	return msgs
}

// Default node count of a local runtime.
const defaultLocalNodes = 3

func defaultKubernetesRuntime(s *KubernetesRuntimeSpec) {
	if s.Provider == ProviderLocal && s.Nodes == 0 {
		s.Nodes = defaultLocalNodes
	}
	defaultEKSRuntime(s)
}

var (
	kubeVersionRE = regexp.MustCompile(`^v1\.[0-9]{1,3}(\.[0-9]{1,3})?$`)
	awsRegionRE   = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$`)
	awsZoneRE     = regexp.MustCompile(`^([a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+)[a-z]$`)
)

func validateKubernetesRuntime(s *KubernetesRuntimeSpec) []FieldError {
	var fe fieldErrors
	switch s.Provider {
	case ProviderLocal, ProviderKubeconfig, ProviderEKS:
	case "":
		fe.add("spec.provider", "is required (one of local, kubeconfig, eks)")
	default:
		fe.add("spec.provider", "must be one of local, kubeconfig, eks, not %q", s.Provider)
	}
	// Region and zones.
	if s.Region != "" {
		if s.Provider == ProviderEKS {
			if !awsRegionRE.MatchString(s.Region) {
				fe.add("spec.region", "must be an AWS region such as us-east-1, not %q", s.Region)
			}
		} else {
			fe.msgs("spec.region", isDNS1123Label(s.Region))
		}
	} else if s.Provider == ProviderEKS {
		fe.add("spec.region", "is required for eks runtimes")
	}
	seenZone := map[string]bool{}
	for i, z := range s.Zones {
		path := fmt.Sprintf("spec.zones[%d]", i)
		if seenZone[z] {
			fe.add(path, "duplicate zone %q", z)
		}
		seenZone[z] = true
		if s.Provider == ProviderEKS {
			m := awsZoneRE.FindStringSubmatch(z)
			switch {
			case m == nil:
				fe.add(path, "must be an AWS availability zone such as us-east-1a, not %q", z)
			case s.Region != "" && m[1] != s.Region:
				fe.add(path, "zone %q is not in region %q", z, s.Region)
			}
		} else {
			fe.msgs(path, isDNS1123Label(z))
		}
	}
	// Node counts.
	if s.Provider == ProviderLocal || s.Provider == ProviderEKS {
		if s.Nodes < 0 || s.Nodes > 100 {
			fe.add("spec.nodes", "must be between 0 and 100, not %d", s.Nodes)
		}
	} else if s.Nodes != 0 {
		fe.add("spec.nodes", "is only valid for local and eks runtimes (use min_nodes and max_nodes)")
	}
	validateEKSFields(&fe, s.Provider, s.CloudAccountID, s.NodeType, s.SubnetIDs)
	validateNodeBounds(&fe, s.Nodes, s.MinNodes, s.MaxNodes)
	// Kubeconfig.
	switch {
	case s.Provider == ProviderKubeconfig && s.Kubeconfig == "":
		fe.add("spec.kubeconfig", "is required for kubeconfig runtimes")
	case s.Provider == ProviderKubeconfig:
		// The kubeconfig's contents are checked by the API server, which has the Kubernetes client.
	case s.Kubeconfig != "":
		fe.add("spec.kubeconfig", "is only valid for kubeconfig runtimes")
	}
	if s.Context != "" && s.Provider != ProviderKubeconfig {
		fe.add("spec.context", "is only valid for kubeconfig runtimes")
	}
	if v := s.KubernetesVersion; v != "" && !kubeVersionRE.MatchString(v) {
		fe.add("spec.kubernetes_version", "must look like v1.31 or v1.31.4, not %q", v)
	}
	return fe
}

// Default replica count and CPU target of a workload definition.
const (
	defaultReplicas  = 1
	defaultCPUTarget = 80
)

func defaultWorkloadDefinition(s *WorkloadDefinitionSpec) {
	if s.Replicas == nil {
		r := int32(defaultReplicas)
		s.Replicas = &r
	}
	if s.Autoscaling != nil && s.Autoscaling.TargetCPUPercent == 0 {
		s.Autoscaling.TargetCPUPercent = defaultCPUTarget
	}
}

func validateWorkloadDefinition(s *WorkloadDefinitionSpec) []FieldError {
	var fe fieldErrors
	sources := 0
	if s.Containers != nil {
		sources++
	}
	if s.Manifests != "" {
		sources++
	}
	if s.Helm != nil {
		sources++
	}
	if sources != 1 {
		fe.add("spec", "exactly one of containers, manifests or helm must be set (%d are)", sources)
	}
	if s.Containers != nil {
		validateContainers(&fe, s.Containers)
	}
	if len(s.Manifests) > MaxDocumentBytes {
		fe.add("spec.manifests", "at most %d bytes are allowed (got %d)", MaxDocumentBytes, len(s.Manifests))
	} else if s.Manifests != "" {
		validateManifests(&fe, s.Manifests)
	}
	if len(s.Containers) > MaxContainers {
		fe.add("spec.containers", "at most %d containers are allowed (got %d)", MaxContainers, len(s.Containers))
	}
	if s.Helm != nil {
		validateHelm(&fe, s.Helm)
	}
	validateReplicas(&fe, "spec.replicas", s.Replicas)
	if a := s.Autoscaling; a != nil {
		if a.MinReplicas < 1 {
			fe.add("spec.autoscaling.min_replicas", "must be at least 1")
		}
		switch {
		case a.MaxReplicas < a.MinReplicas:
			fe.add("spec.autoscaling.max_replicas", "must be at least min_replicas (%d < %d)", a.MaxReplicas, a.MinReplicas)
		case a.MaxReplicas > MaxReplicas:
			fe.add("spec.autoscaling.max_replicas", "must be at most %d, not %d", MaxReplicas, a.MaxReplicas)
		}
		if a.TargetCPUPercent < 1 || a.TargetCPUPercent > 100 {
			fe.add("spec.autoscaling.target_cpu_percent", "must be between 1 and 100, not %d", a.TargetCPUPercent)
		}
	}
	return fe
}

// validateReplicas checks a replica count: between 0 and MaxReplicas.
func validateReplicas(fe *fieldErrors, field string, n *int32) {
	switch {
	case n == nil:
	case *n < 0:
		fe.add(field, "must not be negative")
	case *n > MaxReplicas:
		fe.add(field, "must be at most %d, not %d", MaxReplicas, *n)
	}
}

// RequestedReplicas returns the replica counts a spec asks for, by field path: a definition's replicas
// and autoscaling max_replicas, an instance's replicas. The API server holds them to its per-role limits.
func RequestedReplicas(spec any) map[string]int32 {
	out := map[string]int32{}
	switch s := spec.(type) {
	case *WorkloadDefinitionSpec:
		if s.Replicas != nil {
			out["spec.replicas"] = *s.Replicas
		}
		if s.Autoscaling != nil {
			out["spec.autoscaling.max_replicas"] = s.Autoscaling.MaxReplicas
		}
	case *WorkloadInstanceSpec:
		if s.Replicas != nil {
			out["spec.replicas"] = *s.Replicas
		}
	}
	return out
}

func validateContainers(fe *fieldErrors, cs []Container) {
	if len(cs) == 0 {
		fe.add("spec.containers", "must not be empty")
	}
	names := map[string]bool{}
	for i := range cs {
		c := &cs[i]
		p := fmt.Sprintf("spec.containers[%d]", i)
		if c.Name == "" {
			fe.add(p+".name", "is required")
		} else {
			fe.msgs(p+".name", isDNS1123Label(c.Name))
			if names[c.Name] {
				fe.add(p+".name", "duplicate container name %q", c.Name)
			}
			names[c.Name] = true
		}
		if err := ValidateImage(c.Image); err != nil {
			fe.add(p+".image", "%s", err)
		}
		ports := map[string]bool{}
		portNames := map[string]bool{}
		for j, port := range c.Ports {
			pp := fmt.Sprintf("%s.ports[%d]", p, j)
			if port.ContainerPort < 1 || port.ContainerPort > 65535 {
				fe.add(pp+".container_port", "must be between 1 and 65535, not %d", port.ContainerPort)
			}
			proto := port.Protocol
			switch proto {
			case "":
				proto = "TCP"
			case "TCP", "UDP", "SCTP":
			default:
				fe.add(pp+".protocol", "must be TCP, UDP or SCTP, not %q", port.Protocol)
			}
			key := fmt.Sprintf("%d/%s", port.ContainerPort, proto)
			if ports[key] {
				fe.add(pp+".container_port", "duplicate port %s", key)
			}
			ports[key] = true
			if port.Name != "" {
				fe.msgs(pp+".name", isValidPortName(port.Name))
				if portNames[port.Name] {
					fe.add(pp+".name", "duplicate port name %q", port.Name)
				}
				portNames[port.Name] = true
			}
		}
		validateEnv(fe, p+".env", c.Env)
		if c.Resources != nil {
			validateResources(fe, p+".resources", c.Resources)
		}
		if c.LivenessProbe != nil {
			validateProbe(fe, p+".liveness_probe", c.LivenessProbe)
		}
		if c.ReadinessProbe != nil {
			validateProbe(fe, p+".readiness_probe", c.ReadinessProbe)
		}
	}
}

func validateEnv(fe *fieldErrors, path string, env []EnvVar) {
	if len(env) > MaxEnv {
		fe.add(path, "at most %d environment variables are allowed (got %d)", MaxEnv, len(env))
		return
	}
	seen := map[string]bool{}
	for i, e := range env {
		if len(e.Value) > MaxEnvValueBytes {
			fe.add(fmt.Sprintf("%s[%d].value", path, i), "at most %d bytes are allowed (got %d)", MaxEnvValueBytes, len(e.Value))
		}
		p := fmt.Sprintf("%s[%d].name", path, i)
		if e.Name == "" {
			fe.add(p, "is required")
			continue
		}
		fe.msgs(p, isEnvVarName(e.Name))
		if seen[e.Name] {
			fe.add(p, "duplicate variable %q", e.Name)
		}
		seen[e.Name] = true
	}
}

func validateResources(fe *fieldErrors, path string, r *Resources) {
	parse := func(p, v string) (quantity, bool) {
		if v == "" {
			return quantity{}, false
		}
		q, err := parseQuantity(v)
		if err != nil {
			fe.add(p, "%q is not a quantity: %s", v, err)
			return q, false
		}
		if q.sign() < 0 {
			fe.add(p, "must not be negative")
			return q, false
		}
		return q, true
	}
	rc, okRC := parse(path+".requests.cpu", r.Requests.CPU)
	rm, okRM := parse(path+".requests.memory", r.Requests.Memory)
	lc, okLC := parse(path+".limits.cpu", r.Limits.CPU)
	lm, okLM := parse(path+".limits.memory", r.Limits.Memory)
	if okRC && okLC && rc.cmp(lc) > 0 {
		fe.add(path+".requests.cpu", "must not exceed limits.cpu (%s > %s)", r.Requests.CPU, r.Limits.CPU)
	}
	if okRM && okLM && rm.cmp(lm) > 0 {
		fe.add(path+".requests.memory", "must not exceed limits.memory (%s > %s)", r.Requests.Memory, r.Limits.Memory)
	}
}

func validateProbe(fe *fieldErrors, path string, p *Probe) {
	actions := 0
	if p.HTTPGetPath != "" {
		actions++
		if !strings.HasPrefix(p.HTTPGetPath, "/") {
			fe.add(path+".http_get_path", "must start with /")
		}
	}
	if p.TCP {
		actions++
	}
	if len(p.Exec) > 0 {
		actions++
	}
	if actions != 1 {
		fe.add(path, "exactly one of http_get_path, tcp or exec must be set (%d are)", actions)
	}
	if (p.HTTPGetPath != "" || p.TCP) && (p.Port < 1 || p.Port > 65535) {
		fe.add(path+".port", "must be between 1 and 65535 for HTTP and TCP checks, not %d", p.Port)
	}
	if p.InitialDelaySeconds < 0 {
		fe.add(path+".initial_delay_seconds", "must not be negative")
	}
	if p.PeriodSeconds < 0 {
		fe.add(path+".period_seconds", "must not be negative")
	}
}

func validateManifests(fe *fieldErrors, manifests string) {
	rd := newYAMLDocReader(strings.NewReader(manifests))
	n := 0
	for i := 0; ; i++ {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		p := fmt.Sprintf("spec.manifests[%d]", i)
		if err != nil {
			fe.add(p, "document %d: %s", i, err)
			return
		}
		if len(bytes.TrimSpace(stripYAMLComments(doc))) == 0 {
			continue
		}
		n++
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			fe.add(p, "document %d does not parse as a YAML mapping: %s", i, err)
			continue
		}
		if obj == nil {
			continue
		}
		for _, k := range []string{"apiVersion", "kind"} {
			if s, _ := obj[k].(string); s == "" {
				fe.add(p+"."+k, "document %d: %s is required", i, k)
			}
		}
		md, _ := obj["metadata"].(map[string]any)
		if name, _ := md["name"].(string); name == "" {
			fe.add(p+".metadata.name", "document %d: metadata.name is required", i)
		}
	}
	if n == 0 {
		fe.add("spec.manifests", "contains no YAML documents")
	}
}

func stripYAMLComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			out = append(out, line...)
		}
	}
	return out
}

func validateHelm(fe *fieldErrors, h *HelmSource) {
	switch {
	case h.Chart == "":
		fe.add("spec.helm.chart", "is required")
	case h.Repository == "" && LocalChartEscapes(h.Chart):
		fe.add("spec.helm.chart", "a local chart (no repository) is a path relative to the control plane's chart directory and must stay inside it; %q leads out of it", h.Chart)
	}
	if h.Repository != "" {
		u, err := url.Parse(h.Repository)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "oci") {
			fe.add("spec.helm.repository", "must be an http, https or oci URL, not %q", h.Repository)
		}
	}
	validateValues(fe, "spec.helm.values", h.Values)
}

// LocalChartEscapes reports whether a relative local chart path leads out of the directory it is
// relative to ("..", "a/../../b"), judged on the path's text alone. Absolute paths are not judged here:
// only a server that knows the chart directory can tell whether one is inside it.
func LocalChartEscapes(chart string) bool {
	if strings.ContainsRune(chart, 0) {
		return true
	}
	p := filepath.FromSlash(chart)
	if filepath.IsAbs(p) || strings.HasPrefix(chart, "/") {
		return false
	}
	c := filepath.Clean(p)
	return c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator))
}

// validateValues checks a YAML document of Helm chart values.
func validateValues(fe *fieldErrors, path, values string) {
	if len(values) > MaxDocumentBytes {
		fe.add(path, "at most %d bytes are allowed (got %d)", MaxDocumentBytes, len(values))
	} else if values != "" {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(values), &v); err != nil {
			fe.add(path, "does not parse as a YAML mapping: %s", err)
		}
	}
}

func validateWorkloadInstance(s *WorkloadInstanceSpec) []FieldError {
	var fe fieldErrors
	if s.DefinitionID == "" {
		fe.add("spec.definition_id", "is required")
	}
	switch {
	case s.RuntimeID == "" && s.Placement == nil:
		// Placed only where its consumers run: those that use it with placement with_consumers.
	case s.RuntimeID != "" && s.Placement != nil:
		fe.add("spec.placement", "must not be set with spec.runtime_id (a pinned runtime); set one of them")
	case s.Placement != nil:
		validatePlacement(&fe, s.Placement)
	}
	if s.Namespace != "" {
		fe.msgs("spec.namespace", isDNS1123Label(s.Namespace))
	}
	validateReplicas(&fe, "spec.replicas", s.Replicas)
	validateEnv(&fe, "spec.env", s.Env)
	validateUses(&fe, s.Uses)
	for _, k := range sortedKeys(s.Images) {
		if err := ValidateImage(s.Images[k]); err != nil {
			fe.add(fmt.Sprintf("spec.images[%q]", k), "%s", err)
		}
	}
	return fe
}

func workloadInstanceRefs(s *WorkloadInstanceSpec) []FieldRef {
	var refs []FieldRef
	if s.DefinitionID != "" {
		refs = append(refs, FieldRef{Field: "spec.definition_id", Kind: KindWorkloadDefinition, ID: s.DefinitionID})
	}
	if s.RuntimeID != "" {
		refs = append(refs, FieldRef{Field: "spec.runtime_id", Kind: KindKubernetesRuntime, ID: s.RuntimeID})
	}
	for i, u := range s.Uses {
		if u.InstanceID != "" {
			refs = append(refs, FieldRef{Field: fmt.Sprintf("spec.uses[%d].instance_id", i), Kind: KindWorkloadInstance, ID: u.InstanceID})
		}
	}
	for i, id := range s.Databases {
		refs = append(refs, FieldRef{Field: fmt.Sprintf("spec.databases[%d]", i), Kind: KindDatabase, ID: id})
	}
	for i, id := range s.Buckets {
		refs = append(refs, FieldRef{Field: fmt.Sprintf("spec.buckets[%d]", i), Kind: KindBucket, ID: id})
	}
	return refs
}

func validateWorkloadInstanceRefs(s *WorkloadInstanceSpec, refs map[string]any) []FieldError {
	def, ok := refs["spec.definition_id"].(*WorkloadDefinitionSpec)
	if !ok || len(s.Images) == 0 {
		return nil
	}
	var fe fieldErrors
	names := map[string]bool{}
	for _, c := range def.Containers {
		names[c.Name] = true
	}
	for _, k := range sortedKeys(s.Images) {
		if !names[k] {
			fe.add(fmt.Sprintf("spec.images[%q]", k), "the definition has no container %q", k)
		}
	}
	return fe
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Database providers: where a database runs, chosen by the runtime its instances run on.
const (
	// DatabaseProviderInCluster is a StatefulSet of the engine's official image, off AWS.
	DatabaseProviderInCluster = "in-cluster"
	// DatabaseProviderRDS is an Amazon RDS instance, on eks runtimes.
	DatabaseProviderRDS = "rds"
)

// databaseVersions lists, per engine and per provider, the major versions served: PostgreSQL majors,
// and MySQL's 8.0 and 8.4 release series. Every one is in upstream support, has an official image and
// is offered by RDS.
var databaseVersions = map[string]map[string][]string{
	EnginePostgres: {
		DatabaseProviderInCluster: {"13", "14", "15", "16", "17"},
		DatabaseProviderRDS:       {"13", "14", "15", "16", "17"},
	},
	EngineMySQL: {
		DatabaseProviderInCluster: {"8.0", "8.4"},
		DatabaseProviderRDS:       {"8.0", "8.4"},
	},
}

// DatabaseVersions returns the major versions of an engine that a provider (DatabaseProviderInCluster
// or DatabaseProviderRDS) serves; nil for an unknown engine or provider.
func DatabaseVersions(engine, provider string) []string {
	return append([]string(nil), databaseVersions[engine][provider]...)
}

// DatabaseMajor returns the major version a database version names: the first number for PostgreSQL
// ("16.4" is 16), the release series for MySQL ("8.0.39" is 8.0).
func DatabaseMajor(engine, version string) string {
	parts := strings.Split(version, ".")
	if engine == EngineMySQL && len(parts) >= 2 {
		return parts[0] + "." + parts[1]
	}
	return parts[0]
}

// validateDatabaseVersion checks that every provider serves the version's major: a database runs
// wherever its instances run, in-cluster or on RDS, and placement may move them.
func validateDatabaseVersion(fe *fieldErrors, engine, version string) {
	providers, ok := databaseVersions[engine]
	if !ok {
		return // spec.engine says why
	}
	major := DatabaseMajor(engine, version)
	var supported []string // by every provider, in the in-cluster table's order
	for _, v := range providers[DatabaseProviderInCluster] {
		if slices.Contains(providers[DatabaseProviderRDS], v) {
			supported = append(supported, v)
		}
	}
	if slices.Contains(supported, major) {
		return
	}
	var some []string
	for _, p := range []string{DatabaseProviderInCluster, DatabaseProviderRDS} {
		if slices.Contains(providers[p], major) {
			some = append(some, p)
		}
	}
	if len(some) > 0 {
		fe.add("spec.version", "%s %s is served %s only, and a database runs wherever its instances run; supported everywhere: %s",
			engine, major, strings.Join(some, ", "), strings.Join(supported, ", "))
		return
	}
	fe.add("spec.version", "%s %s is not supported; supported versions: %s (a major, or a release of one, e.g. %s.1)",
		engine, version, strings.Join(supported, ", "), supported[len(supported)-1])
}

// attachedTo is the instance a data service's spec.instance_id attaches it to: that instance uses it.
func attachedTo(instanceID string) []FieldRef {
	if instanceID == "" {
		return nil
	}
	return []FieldRef{{Field: "spec.instance_id", Kind: KindWorkloadInstance, ID: instanceID}}
}
