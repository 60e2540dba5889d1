package api

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Kinds of the support layer.
const (
	// KindSupportService is an add-on installed on a runtime.
	KindSupportService = "support_service"
	// KindGateway is ingress (routing and TLS) for a workload instance.
	KindGateway = "gateway"
	// KindDomainName is a DNS zone whose records gateways get.
	KindDomainName = "domain_name"
)

// Support service types.
const (
	// SupportIngress is an ingress controller with a LoadBalancer Service.
	SupportIngress = "ingress"
	// SupportCertManager issues certificates (Issuer/ClusterIssuer, Certificate).
	SupportCertManager = "cert-manager"
	// SupportExternalDNS writes DNS records for ingresses.
	SupportExternalDNS = "external-dns"
	// SupportMetricsServer serves the metrics API that autoscaling reads.
	SupportMetricsServer = "metrics-server"
)

// SupportChart is the upstream Helm chart a support service type installs by default, at a pinned version.
type SupportChart struct {
	// Repository is the chart repository.
	Repository string
	// Chart is the chart name.
	Chart string
	// Version is the pinned chart version.
	Version string
	// Namespace is where it is installed.
	Namespace string
}

// SupportCharts are the pinned upstream charts, by type.
var SupportCharts = map[string]SupportChart{
	SupportIngress:       {Repository: "https://kubernetes.github.io/ingress-nginx", Chart: "ingress-nginx", Version: "4.11.3", Namespace: "qleet-ingress"},
	SupportCertManager:   {Repository: "https://charts.jetstack.io", Chart: "cert-manager", Version: "v1.16.2", Namespace: "qleet-cert-manager"},
	SupportExternalDNS:   {Repository: "https://kubernetes-sigs.github.io/external-dns", Chart: "external-dns", Version: "1.15.0", Namespace: "qleet-external-dns"},
	SupportMetricsServer: {Repository: "https://kubernetes-sigs.github.io/metrics-server", Chart: "metrics-server", Version: "3.12.2", Namespace: "kube-system"},
}

// IngressClassName is the ingress class the ingress support service installs, and gateways use.
const IngressClassName = "qleet"

// ClusterIssuerName is the ClusterIssuer the cert-manager support service installs, and gateways use.
const ClusterIssuerName = "qleet-issuer"

// SupportServiceSpec declares an add-on on a runtime. Controllers create one (owned by the object that
// needs it) when a dependency needs it and remove it once nothing has used it for a grace period; one an
// operator declares stays.
type SupportServiceSpec struct {
	// RuntimeID is the runtime it is installed on.
	RuntimeID string `json:"runtime_id"`
	// Type is ingress, cert-manager, external-dns or metrics-server.
	Type string `json:"type"`
	// Repository is a chart repository (a mirror) instead of the upstream one; empty: the control plane's
	// support chart directory when it has one for the type, else upstream.
	Repository string `json:"repository,omitempty"`
	// Version is the chart version (default: the pinned upstream version).
	Version string `json:"version,omitempty"`
	// Values is a YAML document of chart values.
	Values string `json:"values,omitempty"`
}

// SupportServiceStatus is the observed state of a support service.
type SupportServiceStatus struct {
	Status
	// Chart says what was installed, e.g. "ingress-nginx 4.11.3 from https://..." or "local ingress".
	Chart string `json:"chart,omitempty"`
	// Namespace is where it is installed.
	Namespace string `json:"namespace,omitempty"`
	// Consumers counts the objects that use it.
	Consumers int `json:"consumers"`
	// UnusedSince is when its last consumer went; a support service a controller created is removed
	// once unused for the grace period.
	UnusedSince *time.Time `json:"unused_since,omitempty"`
	// Objects are the Kubernetes objects it installed.
	Objects []AppliedObject `json:"objects,omitempty"`
}

// SupportService is an add-on on a runtime.
type SupportService = Object[SupportServiceSpec, SupportServiceStatus]

// GatewaySpec routes traffic to an instance, with TLS, on every runtime it is placed on.
type GatewaySpec struct {
	// InstanceID is the workload instance it routes to.
	InstanceID string `json:"instance_id" ref:"workload_instance,attached"`
	// Hosts are the host names it serves; none serves any host (no TLS).
	Hosts []string `json:"hosts,omitempty"`
	// Paths are URL path prefixes (default "/").
	Paths []string `json:"paths,omitempty"`
	// Port is the instance's Service port (default: its first port).
	Port int32 `json:"port,omitempty"`
	// TLS terminates TLS with a certificate from cert-manager (default: on when a host is set).
	TLS *bool `json:"tls,omitempty"`
	// RedirectHTTP redirects HTTP to HTTPS when TLS is on (default true).
	RedirectHTTP *bool `json:"redirect_http,omitempty"`
}

// TLSOn reports whether the gateway terminates TLS.
func (s *GatewaySpec) TLSOn() bool {
	if s.TLS != nil {
		return *s.TLS
	}
	return len(s.Hosts) > 0
}

// GatewayRuntimeStatus is a gateway on one runtime.
type GatewayRuntimeStatus struct {
	// RuntimeID is the runtime.
	RuntimeID string `json:"runtime_id"`
	// Runtime is the runtime's name.
	Runtime string `json:"runtime"`
	// Address is the load-balancer address of the route there.
	Address string `json:"address,omitempty"`
	// URL is where the instance is reached there.
	URL string `json:"url,omitempty"`
	// CertificateReady says the TLS certificate is issued.
	CertificateReady bool `json:"certificate_ready"`
	// CertificateExpiry is when it expires.
	CertificateExpiry *time.Time `json:"certificate_expiry,omitempty"`
	// Phase is Pending, Reconciling, Ready or Failed.
	Phase Phase `json:"phase"`
	// Message explains a phase that is not Ready.
	Message string `json:"message,omitempty"`
	// Objects are the Kubernetes objects applied there.
	Objects []AppliedObject `json:"objects,omitempty"`
}

// GatewayStatus is the observed state of a gateway.
type GatewayStatus struct {
	Status
	// URL is the gateway's URL (its first host, or the first runtime's address).
	URL string `json:"url,omitempty"`
	// Runtimes is the gateway on each runtime its instance is placed on.
	Runtimes []GatewayRuntimeStatus `json:"runtimes,omitempty"`
	// SupportServices are the support services it uses.
	SupportServices []ObjectRef `json:"support_services,omitempty"`
	// DomainNames are the domain names whose zones hold its hosts.
	DomainNames []ObjectRef `json:"domain_names,omitempty"`
}

// Gateway routes traffic to an instance.
type Gateway = Object[GatewaySpec, GatewayStatus]

// DNS providers of domain names.
const (
	// DNSProviderNone keeps the records in the domain name's status only (the local DNS record list).
	DNSProviderNone = "none"
	// DNSProviderRoute53 also writes the records to the zone's Route53 hosted zone (made when absent), in
	// the cloud account of the eks runtimes the zone's gateways run on.
	DNSProviderRoute53 = "route53"
)

// DNSProviders are the accepted values of a domain name's spec.provider, in the order the docs list them.
// The API's validation, the Terraform provider's validator and its docs all read this list.
var DNSProviders = []string{DNSProviderNone, DNSProviderRoute53}

// DomainNameSpec is a DNS zone whose records gateways with hosts in it get.
type DomainNameSpec struct {
	// Zone is the DNS zone, e.g. "example.com".
	Zone string `json:"zone"`
	// Provider is "none" (records listed in status only) or "route53" (also written to the zone's Route53
	// hosted zone, in the cloud account of the eks runtimes its gateways run on).
	Provider string `json:"provider,omitempty"`
}

// DNSRecord is one record a domain name holds.
type DNSRecord struct {
	// Name is the record's full name, e.g. "app.example.com".
	Name string `json:"name"`
	// Type is "A" or "CNAME".
	Type string `json:"type"`
	// Targets are the addresses.
	Targets []string `json:"targets"`
	// Gateway names the gateways the record is for: several, comma-separated, when they serve its host
	// on paths of their own.
	Gateway string `json:"gateway"`
}

// DomainNameStatus is the observed state of a domain name.
type DomainNameStatus struct {
	Status
	// Records are the records of the zone's gateways.
	Records []DNSRecord `json:"records,omitempty"`
}

// DomainName is a DNS zone.
type DomainName = Object[DomainNameSpec, DomainNameStatus]

// InZone reports whether host is in zone (the apex or below it).
func InZone(host, zone string) bool {
	host, zone = strings.TrimSuffix(strings.ToLower(host), "."), strings.TrimSuffix(strings.ToLower(zone), ".")
	return host == zone || strings.HasSuffix(host, "."+zone)
}

func validateSupportService(s *SupportServiceSpec) []FieldError {
	var fe fieldErrors
	if s.RuntimeID == "" {
		fe.add("spec.runtime_id", "is required")
	}
	if _, ok := SupportCharts[s.Type]; !ok {
		fe.add("spec.type", "must be one of ingress, cert-manager, external-dns, metrics-server, not %q", s.Type)
	}
	if s.Repository != "" {
		if u, err := url.Parse(s.Repository); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "oci") {
			fe.add("spec.repository", "must be an http, https or oci URL, not %q", s.Repository)
		}
	}
	validateValues(&fe, "spec.values", s.Values)
	return fe
}

func supportServiceRefs(s *SupportServiceSpec) []FieldRef {
	if s.RuntimeID == "" {
		return nil
	}
	return []FieldRef{{Field: "spec.runtime_id", Kind: KindKubernetesRuntime, ID: s.RuntimeID}}
}

func defaultGateway(s *GatewaySpec) {
	if len(s.Paths) == 0 {
		s.Paths = []string{"/"}
	}
}

func validateGateway(s *GatewaySpec) []FieldError {
	var fe fieldErrors
	if s.InstanceID == "" {
		fe.add("spec.instance_id", "is required")
	}
	if len(s.Hosts) > 16 {
		fe.add("spec.hosts", "at most 16 hosts are allowed (got %d)", len(s.Hosts))
	}
	seen := map[string]bool{}
	for i, h := range s.Hosts {
		p := fmt.Sprintf("spec.hosts[%d]", i)
		if seen[h] {
			fe.add(p, "duplicate host %q", h)
		}
		seen[h] = true
		fe.msgs(p, isDNS1123Subdomain(h))
	}
	if len(s.Paths) > 16 {
		fe.add("spec.paths", "at most 16 paths are allowed (got %d)", len(s.Paths))
	}
	for i, p := range s.Paths {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " \t\n?#") {
			fe.add(fmt.Sprintf("spec.paths[%d]", i), "must be a URL path starting with /, without spaces, query or fragment, not %q", p)
		}
	}
	if s.Port < 0 || s.Port > 65535 {
		fe.add("spec.port", "must be between 1 and 65535, not %d", s.Port)
	}
	if s.TLS != nil && *s.TLS && len(s.Hosts) == 0 {
		fe.add("spec.tls", "needs at least one host (a certificate names its hosts)")
	}
	return fe
}

func gatewayRefs(s *GatewaySpec) []FieldRef {
	if s.InstanceID == "" {
		return nil
	}
	return []FieldRef{{Field: "spec.instance_id", Kind: KindWorkloadInstance, ID: s.InstanceID}}
}

// gatewayStatusRefs are the support services and domain names a gateway uses: they are not removed while
// it does, and their readiness wakes it.
func gatewayStatusRefs(s *GatewayStatus) []FieldRef {
	var refs []FieldRef
	for i, r := range s.SupportServices {
		refs = append(refs, FieldRef{Field: fmt.Sprintf("status.support_services[%d]", i), Kind: KindSupportService, ID: r.ID})
	}
	for i, r := range s.DomainNames {
		refs = append(refs, FieldRef{Field: fmt.Sprintf("status.domain_names[%d]", i), Kind: KindDomainName, ID: r.ID})
	}
	return refs
}

func defaultDomainName(s *DomainNameSpec) {
	if s.Provider == "" {
		s.Provider = DNSProviderNone
	}
}

func validateDomainName(s *DomainNameSpec) []FieldError {
	var fe fieldErrors
	if s.Zone == "" {
		fe.add("spec.zone", "is required")
	} else {
		fe.msgs("spec.zone", isDNS1123Subdomain(strings.TrimSuffix(s.Zone, ".")))
	}
	if !slices.Contains(DNSProviders, s.Provider) {
		fe.add("spec.provider", "must be %s, not %q", strings.Join(DNSProviders[:len(DNSProviders)-1], ", ")+" or "+DNSProviders[len(DNSProviders)-1], s.Provider)
	}
	return fe
}

// validateDomainNamePeers refuses a zone another domain name already holds.
func validateDomainNamePeers(s *DomainNameSpec, peers []Peer[DomainNameSpec]) []FieldError {
	var fe fieldErrors
	for _, p := range peers {
		if strings.EqualFold(strings.TrimSuffix(p.Spec.Zone, "."), strings.TrimSuffix(s.Zone, ".")) {
			fe.add("spec.zone", "zone %q is already held by domain_name %q", s.Zone, p.Name)
		}
	}
	return fe
}

func init() {
	RegisterKind(KindDef[SupportServiceSpec, SupportServiceStatus]{
		Kind:        KindSupportService,
		Title:       "support service",
		ShortNames:  []string{"support"},
		Description: "An add-on on a runtime: `ingress`, `cert-manager`, `external-dns` or `metrics-server`, installed from its pinned upstream Helm chart (or a mirror, or the control plane's local chart directory). Controllers create the ones a dependency needs and remove them once nothing has used them for a grace period; one an operator declares stays until deleted.",
		Validate:    validateSupportService,
		Refs:        supportServiceRefs,
	})
}

func init() {
	RegisterKind(KindDef[GatewaySpec, GatewayStatus]{
		Kind:        KindGateway,
		Title:       "gateway",
		ShortNames:  []string{"gateway", "gw"},
		Description: "Ingress for a workload instance on every runtime it is placed on: hosts, paths, the service port, TLS (on by default when a host is set) with a certificate from cert-manager, and an HTTP to HTTPS redirect. Where a runtime lacks the `ingress` or `cert-manager` support service (or `external-dns`, when a domain name holds a host), it is installed as soon as the instance is placed there, while the app still rolls out, and removed again a grace period after the last gateway that used it; the route goes in once the app is applied there. It is Ready once the instance is Ready and every runtime has an address and, with TLS, an issued certificate; `status.url` tells where to go.",
		Default:     defaultGateway,
		Validate:    validateGateway,
		Refs:        gatewayRefs,
		StatusRefs:  gatewayStatusRefs,
	})
}

func init() {
	RegisterKind(KindDef[DomainNameSpec, DomainNameStatus]{
		Kind:          KindDomainName,
		Title:         "domain name",
		ShortNames:    []string{"domain"},
		Description:   "A DNS zone. Gateways whose hosts are in it get records through external-dns, which is installed on their runtimes while they do. With `dns_provider = \"none\"` the records are listed in `status.records` only; with `route53` they are also written to the zone's public hosted zone (found by name, or created) in the cloud account of the gateways' eks runtimes, each with a `_qleetos.<host>` TXT ownership record; records QleetOS did not write are never changed.",
		Default:       defaultDomainName,
		Validate:      validateDomainName,
		ValidatePeers: validateDomainNamePeers,
	})
}
