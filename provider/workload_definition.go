package provider

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// workloadDefinitionModel is qleet_workload_definition.
type workloadDefinitionModel struct {
	objectMeta
	Containers    types.List   `tfsdk:"containers"`
	Manifests     types.String `tfsdk:"manifests"`
	Helm          types.Object `tfsdk:"helm"`
	Replicas      types.Int64  `tfsdk:"replicas"`
	Autoscaling   types.Object `tfsdk:"autoscaling"`
	ClusterScoped types.Bool   `tfsdk:"cluster_scoped"`
}

type containerModel struct {
	Name           types.String `tfsdk:"name"`
	Image          types.String `tfsdk:"image"`
	Command        types.List   `tfsdk:"command"`
	Args           types.List   `tfsdk:"args"`
	Ports          types.List   `tfsdk:"ports"`
	Env            types.Map    `tfsdk:"env"`
	Resources      types.Object `tfsdk:"resources"`
	LivenessProbe  types.Object `tfsdk:"liveness_probe"`
	ReadinessProbe types.Object `tfsdk:"readiness_probe"`
}

type portModel struct {
	Name          types.String `tfsdk:"name"`
	ContainerPort types.Int64  `tfsdk:"container_port"`
	Protocol      types.String `tfsdk:"protocol"`
}

type resourcesModel struct {
	Requests types.Object `tfsdk:"requests"`
	Limits   types.Object `tfsdk:"limits"`
}

type quantitiesModel struct {
	CPU    types.String `tfsdk:"cpu"`
	Memory types.String `tfsdk:"memory"`
}

type probeModel struct {
	HTTPGetPath         types.String `tfsdk:"http_get_path"`
	Port                types.Int64  `tfsdk:"port"`
	TCP                 types.Bool   `tfsdk:"tcp"`
	Exec                types.List   `tfsdk:"exec"`
	InitialDelaySeconds types.Int64  `tfsdk:"initial_delay_seconds"`
	PeriodSeconds       types.Int64  `tfsdk:"period_seconds"`
}

type helmModel struct {
	Repository types.String `tfsdk:"repository"`
	Chart      types.String `tfsdk:"chart"`
	Version    types.String `tfsdk:"version"`
	Values     types.String `tfsdk:"values"`
}

type autoscalingModel struct {
	MinReplicas      types.Int64 `tfsdk:"min_replicas"`
	MaxReplicas      types.Int64 `tfsdk:"max_replicas"`
	TargetCPUPercent types.Int64 `tfsdk:"target_cpu_percent"`
}

func quantitiesAttributes(what string) map[string]rschema.Attribute {
	return map[string]rschema.Attribute{
		"cpu":    rschema.StringAttribute{Description: "CPU " + what + ", a Kubernetes quantity such as `250m`.", Optional: true},
		"memory": rschema.StringAttribute{Description: "Memory " + what + ", a Kubernetes quantity such as `256Mi`.", Optional: true},
	}
}

var resourcesAttributes = map[string]rschema.Attribute{
	"requests": rschema.SingleNestedAttribute{
		Description: "What the scheduler reserves for the container.", Optional: true, Attributes: quantitiesAttributes("request"),
	},
	"limits": rschema.SingleNestedAttribute{
		Description: "What the container may use at most.", Optional: true, Attributes: quantitiesAttributes("limit"),
	},
}

var probeAttributes = map[string]rschema.Attribute{
	"http_get_path": rschema.StringAttribute{
		Description: "The path of an HTTP GET check on port, starting with `/`.", Optional: true,
		Validators: []validator.String{stringvalidator.RegexMatches(slashPrefix, "must start with /")},
	},
	"port": rschema.Int64Attribute{
		Description: "The port of an HTTP or TCP check, 1-65535.", Optional: true,
		Validators: []validator.Int64{int64validator.Between(1, 65535)},
	},
	"tcp": rschema.BoolAttribute{Description: "Make the check a TCP connect to port.", Optional: true},
	"exec": rschema.ListAttribute{
		Description: "A command run in the container; exit status 0 passes.", Optional: true, ElementType: types.StringType,
	},
	"initial_delay_seconds": rschema.Int64Attribute{
		Description: "Seconds before the first check.", Optional: true,
		Validators: []validator.Int64{int64validator.AtLeast(0)},
	},
	"period_seconds": rschema.Int64Attribute{
		Description: "Seconds between checks.", Optional: true,
		Validators: []validator.Int64{int64validator.AtLeast(0)},
	},
}

// probeRule: exactly one action, and a port for HTTP and TCP checks.
var probeRule = objectRule{
	desc: "exactly one of http_get_path, tcp or exec; port with http_get_path and tcp",
	check: func(a map[string]attr.Value) []string {
		actions, unknown := 0, false
		if v, ok := a["http_get_path"].(types.String); ok {
			unknown = unknown || v.IsUnknown()
			if known(v) && v.ValueString() != "" {
				actions++
			}
		}
		if v, ok := a["tcp"].(types.Bool); ok {
			unknown = unknown || v.IsUnknown()
			if known(v) && v.ValueBool() {
				actions++
			}
		}
		if v, ok := a["exec"].(types.List); ok {
			unknown = unknown || v.IsUnknown()
			if known(v) && len(v.Elements()) > 0 {
				actions++
			}
		}
		if unknown {
			return nil
		}
		var msgs []string
		if actions != 1 {
			msgs = append(msgs, fmt.Sprintf("exactly one of http_get_path, tcp or exec must be set (%d are)", actions))
		}
		if port, ok := a["port"].(types.Int64); ok && port.IsNull() && actions == 1 && a["exec"].IsNull() {
			msgs = append(msgs, "port is required for HTTP and TCP checks")
		}
		return msgs
	},
}

var portAttributes = map[string]rschema.Attribute{
	"name": rschema.StringAttribute{
		Description: "An optional name for the port (an IANA service name, at most 15 characters).", Optional: true,
		Validators: []validator.String{stringvalidator.LengthBetween(1, 15)},
	},
	"container_port": rschema.Int64Attribute{
		Description: "The port number, 1-65535.", Required: true,
		Validators: []validator.Int64{int64validator.Between(1, 65535)},
	},
	"protocol": rschema.StringAttribute{
		Description: "TCP (the default when unset), UDP or SCTP.", Optional: true,
		Validators: []validator.String{stringvalidator.OneOf("TCP", "UDP", "SCTP")},
	},
}

var containerAttributes = map[string]rschema.Attribute{
	"name": rschema.StringAttribute{
		Description: "The container's name, a DNS-1123 label unique within the definition.", Required: true,
		Validators: []validator.String{dns1123Label()},
	},
	"image": rschema.StringAttribute{
		Description: "The OCI image reference, e.g. `nginx:1.27`.", Required: true,
		Validators: []validator.String{imageRef()},
	},
	"command": rschema.ListAttribute{
		Description: "Overrides the image's entrypoint.", Optional: true, ElementType: types.StringType,
	},
	"args": rschema.ListAttribute{
		Description: "Arguments to the entrypoint.", Optional: true, ElementType: types.StringType,
	},
	"ports": rschema.ListNestedAttribute{
		Description:  "Ports the container listens on. A Service is created when any container declares ports.",
		Optional:     true,
		NestedObject: rschema.NestedAttributeObject{Attributes: portAttributes},
	},
	"env": rschema.MapAttribute{
		Description: "Environment variables, name to value.", Optional: true, ElementType: types.StringType,
	},
	"resources": rschema.SingleNestedAttribute{
		Description: "CPU and memory requests and limits.", Optional: true, Attributes: resourcesAttributes,
	},
	"liveness_probe": rschema.SingleNestedAttribute{
		Description: "A check that restarts the container when it fails.", Optional: true, Attributes: probeAttributes,
		Validators: []validator.Object{probeRule},
	},
	"readiness_probe": rschema.SingleNestedAttribute{
		Description: "A check that gates traffic until it passes.", Optional: true, Attributes: probeAttributes,
		Validators: []validator.Object{probeRule},
	},
}

var helmAttributes = map[string]rschema.Attribute{
	"repository": rschema.StringAttribute{
		Description: "The chart repository URL (http, https or oci); unset when chart is a local path.", Optional: true,
		Validators: []validator.String{stringvalidator.RegexMatches(repoURL, "must be an http, https or oci URL")},
	},
	"chart": rschema.StringAttribute{
		Description: "The chart name in repository or, with no repository, a chart directory or archive in the control plane's chart directory (`qleet server --chart-dir`, default `<data-dir>/charts`), by a path relative to it.", Required: true,
		Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
	},
	"version": rschema.StringAttribute{Description: "The chart version; the latest when unset.", Optional: true},
	"values":  rschema.StringAttribute{Description: "Chart values, a YAML document (e.g. `yamlencode({...})`).", Optional: true},
}

var autoscalingAttributes = map[string]rschema.Attribute{
	"min_replicas": rschema.Int64Attribute{
		Description: "The lower replica bound, at least 1.", Required: true,
		Validators: []validator.Int64{int64validator.AtLeast(1)},
	},
	"max_replicas": rschema.Int64Attribute{
		Description: "The upper replica bound, at least min_replicas.", Required: true,
		Validators: []validator.Int64{int64validator.AtLeast(1)},
	},
	"target_cpu_percent": rschema.Int64Attribute{
		Description: "The average CPU utilization target, 1-100 (the API defaults it to 80).", Optional: true, Computed: true,
		Validators:    []validator.Int64{int64validator.Between(1, 100)},
		PlanModifiers: []planmodifier.Int64{serverDefault{value: 80}},
	},
}

// autoscalingRule: min_replicas <= max_replicas.
var autoscalingRule = objectRule{
	desc: "min_replicas must not exceed max_replicas",
	check: func(a map[string]attr.Value) []string {
		lo, ok1 := knownInt(a["min_replicas"])
		hi, ok2 := knownInt(a["max_replicas"])
		if ok1 && ok2 && lo > hi {
			return []string{fmt.Sprintf("min_replicas must not exceed max_replicas (%d > %d)", lo, hi)}
		}
		return nil
	},
}

var (
	containerType   = objectTypeOf(containerAttributes)
	portType        = objectTypeOf(portAttributes)
	resourcesType   = objectTypeOf(resourcesAttributes)
	quantitiesType  = objectTypeOf(quantitiesAttributes(""))
	probeType       = objectTypeOf(probeAttributes)
	helmType        = objectTypeOf(helmAttributes)
	autoscalingType = objectTypeOf(autoscalingAttributes)
)

var workloadDefinitionKind = &kind[api.WorkloadDefinitionSpec, api.WorkloadDefinitionStatus, workloadDefinitionModel]{
	name: api.KindWorkloadDefinition,
	api:  (*client.Client).WorkloadDefinitions,
	attributes: map[string]rschema.Attribute{
		"containers": rschema.ListNestedAttribute{
			Description:  "The containers of the workload, run as one Deployment.",
			Optional:     true,
			NestedObject: rschema.NestedAttributeObject{Attributes: containerAttributes},
			Validators:   []validator.List{listvalidator.SizeAtLeast(1)},
		},
		"manifests": rschema.StringAttribute{
			Description: "Kubernetes objects to apply, as a multi-document YAML string.",
			Optional:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"helm": rschema.SingleNestedAttribute{
			Description: "A Helm chart to render and apply.",
			Optional:    true,
			Attributes:  helmAttributes,
		},
		"replicas": rschema.Int64Attribute{
			Description:   "The default replica count, at least 0 (the API defaults it to 1). Instances may override it.",
			Optional:      true,
			Computed:      true,
			PlanModifiers: []planmodifier.Int64{serverDefault{value: 1}},
			Validators:    []validator.Int64{int64validator.AtLeast(0)},
		},
		"autoscaling": rschema.SingleNestedAttribute{
			Description: "When set, a HorizontalPodAutoscaler scales the workload between the bounds.",
			Optional:    true,
			Attributes:  autoscalingAttributes,
			Validators:  []validator.Object{autoscalingRule},
		},
		"cluster_scoped": rschema.BoolAttribute{
			Description: "Let the manifests or chart hold cluster-scoped objects (ClusterRoles, CustomResourceDefinitions, other " +
				"Namespaces) and objects in namespaces other than the instance's (default false: such objects fail the instance, " +
				"naming them). Only an admin token may set it.",
			Optional: true,
		},
	},
	statusAttributes: map[string]rschema.Attribute{
		"instances": rschema.Int64Attribute{Description: "How many workload instances run this definition.", Computed: true},
	},
	validators: []resource.ConfigValidator{
		resourcevalidator.ExactlyOneOf(path.MatchRoot("containers"), path.MatchRoot("manifests"), path.MatchRoot("helm")),
	},
	toSpec:   workloadDefinitionSpec,
	fromSpec: workloadDefinitionFromSpec,
	statusValues: func(t *api.WorkloadDefinitionStatus) attrValues {
		return attrValues{"instances": types.Int64Value(int64(t.Instances))}
	},
	createTimeout: 10 * time.Minute,
	updateTimeout: 10 * time.Minute,
	deleteTimeout: 10 * time.Minute,
}

func workloadDefinitionSpec(ctx context.Context, m *workloadDefinitionModel) (api.WorkloadDefinitionSpec, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := api.WorkloadDefinitionSpec{Manifests: m.Manifests.ValueString(), Replicas: int32Ptr(m.Replicas), ClusterScoped: m.ClusterScoped.ValueBool()}
	cms, d := objectsOf[containerModel](ctx, m.Containers)
	diags.Append(d...)
	if cms != nil {
		s.Containers = make([]api.Container, len(cms))
	}
	for i := range cms {
		c, d := containerSpec(ctx, &cms[i])
		diags.Append(d...)
		s.Containers[i] = c
	}
	h, d := objectOf[helmModel](ctx, m.Helm)
	diags.Append(d...)
	if h != nil {
		s.Helm = &api.HelmSource{
			Repository: h.Repository.ValueString(), Chart: h.Chart.ValueString(),
			Version: h.Version.ValueString(), Values: h.Values.ValueString(),
		}
	}
	a, d := objectOf[autoscalingModel](ctx, m.Autoscaling)
	diags.Append(d...)
	if a != nil {
		s.Autoscaling = &api.Autoscaling{
			MinReplicas:      int32(a.MinReplicas.ValueInt64()),
			MaxReplicas:      int32(a.MaxReplicas.ValueInt64()),
			TargetCPUPercent: int32(a.TargetCPUPercent.ValueInt64()),
		}
	}
	return s, diags
}

func containerSpec(ctx context.Context, m *containerModel) (api.Container, diag.Diagnostics) {
	var diags diag.Diagnostics
	c := api.Container{Name: m.Name.ValueString(), Image: m.Image.ValueString()}
	var d diag.Diagnostics
	c.Command, d = stringsOf(ctx, m.Command)
	diags.Append(d...)
	c.Args, d = stringsOf(ctx, m.Args)
	diags.Append(d...)
	ports, d := objectsOf[portModel](ctx, m.Ports)
	diags.Append(d...)
	for _, p := range ports {
		c.Ports = append(c.Ports, api.ContainerPort{
			Name: p.Name.ValueString(), ContainerPort: int32(p.ContainerPort.ValueInt64()), Protocol: p.Protocol.ValueString(),
		})
	}
	env, d := stringMapOf(ctx, m.Env)
	diags.Append(d...)
	c.Env = envList(env)
	res, d := objectOf[resourcesModel](ctx, m.Resources)
	diags.Append(d...)
	if res != nil {
		c.Resources = &api.Resources{}
		req, d := objectOf[quantitiesModel](ctx, res.Requests)
		diags.Append(d...)
		if req != nil {
			c.Resources.Requests = api.ResourceList{CPU: req.CPU.ValueString(), Memory: req.Memory.ValueString()}
		}
		lim, d := objectOf[quantitiesModel](ctx, res.Limits)
		diags.Append(d...)
		if lim != nil {
			c.Resources.Limits = api.ResourceList{CPU: lim.CPU.ValueString(), Memory: lim.Memory.ValueString()}
		}
	}
	c.LivenessProbe, d = probeSpec(ctx, m.LivenessProbe)
	diags.Append(d...)
	c.ReadinessProbe, d = probeSpec(ctx, m.ReadinessProbe)
	diags.Append(d...)
	return c, diags
}

func probeSpec(ctx context.Context, o types.Object) (*api.Probe, diag.Diagnostics) {
	p, diags := objectOf[probeModel](ctx, o)
	if p == nil {
		return nil, diags
	}
	exec, d := stringsOf(ctx, p.Exec)
	diags.Append(d...)
	return &api.Probe{
		HTTPGetPath: p.HTTPGetPath.ValueString(), Port: int32(p.Port.ValueInt64()), TCP: p.TCP.ValueBool(), Exec: exec,
		InitialDelaySeconds: int32(p.InitialDelaySeconds.ValueInt64()), PeriodSeconds: int32(p.PeriodSeconds.ValueInt64()),
	}, diags
}

// envList converts an env map to the API's list, sorted by name so that it is stable.
func envList(env map[string]string) []api.EnvVar {
	var out []api.EnvVar
	for _, k := range sortedNames(env) {
		out = append(out, api.EnvVar{Name: k, Value: env[k]})
	}
	return out
}

// envMap converts the API's env list to a map.
func envMap(env []api.EnvVar) map[string]string {
	if len(env) == 0 {
		return nil
	}
	out := make(map[string]string, len(env))
	for _, e := range env {
		out[e.Name] = e.Value
	}
	return out
}

func workloadDefinitionFromSpec(ctx context.Context, s *api.WorkloadDefinitionSpec, m *workloadDefinitionModel) diag.Diagnostics {
	var diags diag.Diagnostics
	prior, d := objectsOf[containerModel](ctx, m.Containers)
	diags.Append(d...)
	var cms []containerModel
	if s.Containers != nil {
		cms = make([]containerModel, len(s.Containers))
	}
	for i := range s.Containers {
		cm, d := containerFromSpec(ctx, &s.Containers[i], priorAt(prior, i))
		diags.Append(d...)
		cms[i] = cm
	}
	m.Containers, d = objectListValue(ctx, containerType, m.Containers, cms)
	diags.Append(d...)
	m.Manifests = stringValue(m.Manifests, s.Manifests)

	var h *helmModel
	if s.Helm != nil {
		ph, d := objectOf[helmModel](ctx, m.Helm)
		diags.Append(d...)
		if ph == nil {
			ph = &helmModel{}
		}
		h = &helmModel{
			Repository: stringValue(ph.Repository, s.Helm.Repository),
			Chart:      types.StringValue(s.Helm.Chart),
			Version:    stringValue(ph.Version, s.Helm.Version),
			Values:     stringValue(ph.Values, s.Helm.Values),
		}
	}
	m.Helm, d = objectValue(ctx, helmType, h)
	diags.Append(d...)

	m.Replicas = int32PtrValue(s.Replicas)
	var a *autoscalingModel
	if s.Autoscaling != nil {
		a = &autoscalingModel{
			MinReplicas:      types.Int64Value(int64(s.Autoscaling.MinReplicas)),
			MaxReplicas:      types.Int64Value(int64(s.Autoscaling.MaxReplicas)),
			TargetCPUPercent: types.Int64Value(int64(s.Autoscaling.TargetCPUPercent)),
		}
	}
	m.Autoscaling, d = objectValue(ctx, autoscalingType, a)
	diags.Append(d...)
	m.ClusterScoped = boolValue(m.ClusterScoped, s.ClusterScoped)
	return diags
}

func containerFromSpec(ctx context.Context, c *api.Container, prior containerModel) (containerModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	m := containerModel{
		Name:    types.StringValue(c.Name),
		Image:   types.StringValue(c.Image),
		Command: stringListValue(prior.Command, c.Command),
		Args:    stringListValue(prior.Args, c.Args),
		Env:     stringMapValue(prior.Env, envMap(c.Env)),
	}
	priorPorts, d := objectsOf[portModel](ctx, prior.Ports)
	diags.Append(d...)
	var ports []portModel
	for i, p := range c.Ports {
		pp := priorAt(priorPorts, i)
		ports = append(ports, portModel{
			Name:          stringValue(pp.Name, p.Name),
			ContainerPort: types.Int64Value(int64(p.ContainerPort)),
			Protocol:      stringValue(pp.Protocol, p.Protocol),
		})
	}
	m.Ports, d = objectListValue(ctx, portType, prior.Ports, ports)
	diags.Append(d...)

	var res *resourcesModel
	if c.Resources != nil {
		pr, d := objectOf[resourcesModel](ctx, prior.Resources)
		diags.Append(d...)
		if pr == nil {
			pr = &resourcesModel{}
		}
		res = &resourcesModel{}
		res.Requests, d = quantitiesValue(ctx, pr.Requests, c.Resources.Requests)
		diags.Append(d...)
		res.Limits, d = quantitiesValue(ctx, pr.Limits, c.Resources.Limits)
		diags.Append(d...)
	}
	m.Resources, d = objectValue(ctx, resourcesType, res)
	diags.Append(d...)
	m.LivenessProbe, d = probeValue(ctx, prior.LivenessProbe, c.LivenessProbe)
	diags.Append(d...)
	m.ReadinessProbe, d = probeValue(ctx, prior.ReadinessProbe, c.ReadinessProbe)
	diags.Append(d...)
	return m, diags
}

func quantitiesValue(ctx context.Context, prior types.Object, q api.ResourceList) (types.Object, diag.Diagnostics) {
	if q == (api.ResourceList{}) && prior.IsNull() {
		return types.ObjectNull(quantitiesType.AttrTypes), nil
	}
	pq, diags := objectOf[quantitiesModel](ctx, prior)
	if pq == nil {
		pq = &quantitiesModel{}
	}
	v, d := objectValue(ctx, quantitiesType, &quantitiesModel{CPU: stringValue(pq.CPU, q.CPU), Memory: stringValue(pq.Memory, q.Memory)})
	diags.Append(d...)
	return v, diags
}

func probeValue(ctx context.Context, prior types.Object, p *api.Probe) (types.Object, diag.Diagnostics) {
	if p == nil {
		return types.ObjectNull(probeType.AttrTypes), nil
	}
	pp, diags := objectOf[probeModel](ctx, prior)
	if pp == nil {
		pp = &probeModel{}
	}
	v, d := objectValue(ctx, probeType, &probeModel{
		HTTPGetPath:         stringValue(pp.HTTPGetPath, p.HTTPGetPath),
		Port:                int64Value(pp.Port, int64(p.Port)),
		TCP:                 boolValue(pp.TCP, p.TCP),
		Exec:                stringListValue(pp.Exec, p.Exec),
		InitialDelaySeconds: int64Value(pp.InitialDelaySeconds, int64(p.InitialDelaySeconds)),
		PeriodSeconds:       int64Value(pp.PeriodSeconds, int64(p.PeriodSeconds)),
	})
	diags.Append(d...)
	return v, diags
}

var (
	slashPrefix = regexp.MustCompile(`^/`)
	repoURL     = regexp.MustCompile(`^(https?|oci)://[^/]+`)
)
