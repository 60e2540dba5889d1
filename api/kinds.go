package api

import "time"

// Kind names. Each kind has a REST collection /v1/<plural> and a Terraform resource qleet_<singular>.
const (
	KindKubernetesRuntime  = "kubernetes_runtime"
	KindWorkloadDefinition = "workload_definition"
	KindWorkloadInstance   = "workload_instance"
)

// Plural returns the collection name of a singular kind ("kubernetes_runtime" -> "kubernetes_runtimes").
func Plural(kind string) string { return kind + "s" }

// Runtime providers.
const (
	ProviderLocal      = "local"
	ProviderKubeconfig = "kubeconfig"
	ProviderEKS        = "eks"
)

// KubernetesRuntimeSpec declares a Kubernetes cluster in the compute space.
type KubernetesRuntimeSpec struct {
	// Provider is "local" (a kubesim cluster owned by the control plane), "kubeconfig" (bring your own) or "eks".
	Provider string `json:"provider"`
	// Region is the region the cluster lives in; local clusters label their nodes with it.
	Region string `json:"region,omitempty"`
	// Zones are the availability zones of a local cluster's nodes.
	Zones []string `json:"zones,omitempty"`
	// Nodes is the node count of a local cluster (default 3).
	Nodes int `json:"nodes,omitempty"`
	// MinNodes and MaxNodes bound node autoscaling where the provider supports it.
	MinNodes int `json:"min_nodes,omitempty"`
	// MaxNodes is the upper node bound for autoscaling.
	MaxNodes int `json:"max_nodes,omitempty"`
	// Kubeconfig is the kubeconfig document of a "kubeconfig" runtime. Write-only: returned only to controllers.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context selects a kubeconfig context; the current context when empty.
	Context string `json:"context,omitempty"`
	// KubernetesVersion is the version the cluster must run, e.g. "v1.31"; any when empty. A cluster
	// running another version fails the runtime.
	KubernetesVersion string `json:"kubernetes_version,omitempty"`
	// CloudAccountID is the cloud_account an "eks" runtime is provisioned with.
	CloudAccountID string `json:"cloud_account_id,omitempty"`
	// NodeType is the EC2 instance type of an "eks" runtime's managed node group (default t3.medium).
	NodeType string `json:"node_type,omitempty"`
	// SubnetIDs are existing subnets (in two zones at least) for an "eks" runtime; QleetOS makes a VPC
	// with subnets when empty.
	SubnetIDs []string `json:"subnet_ids,omitempty" ref:"-"`
}

// KubernetesRuntimeStatus is the observed state of a runtime.
type KubernetesRuntimeStatus struct {
	Status
	// Endpoint is the API server address.
	Endpoint string `json:"endpoint,omitempty"`
	// Version is the Kubernetes server version, e.g. "v1.31.4".
	Version string `json:"version,omitempty"`
	// NodesReady counts nodes whose Ready condition is True.
	NodesReady int `json:"nodes_ready"`
	// NodesTotal counts all nodes.
	NodesTotal int `json:"nodes_total"`
	// Region is the region reported by the nodes' topology labels.
	Region string `json:"region,omitempty"`
	// Placements counts the workload instances placed on the runtime.
	Placements int `json:"placements"`
	// IdleSince is when the last instance placed on the runtime left it; unset while any is placed.
	// A runtime provisioned from a profile with reclaim_after is removed once idle that long.
	IdleSince *time.Time `json:"idle_since,omitempty"`
	// NodesAdded and NodesRemoved count the nodes node autoscaling added and removed.
	NodesAdded int `json:"nodes_added,omitempty"`
	// NodesRemoved counts nodes removed by node autoscaling.
	NodesRemoved int `json:"nodes_removed,omitempty"`
	// Cloud lists what QleetOS made in the cloud for an "eks" runtime, and the step in progress.
	Cloud *CloudResources `json:"cloud,omitempty"`
	// Data lists the data of databases and buckets the runtime holds: those that run there, and those
	// deleted with retain whose volume and credentials were kept there. It is looked for on a runtime
	// that may be reclaimed (provisioned from a profile with reclaim_after): a runtime that holds data
	// is in use, and is not reclaimed until the data is released (condition HoldsData says how).
	Data []RuntimeData `json:"data,omitempty"`
}

// LabelRetained marks the namespace (and the credentials) of a database or bucket deleted with retain,
// with its name, so that one of its kind and name created later takes them back.
const LabelRetained = "qleetos.io/retained"

// RuntimeData is one database's or bucket's data on a runtime.
type RuntimeData struct {
	// Kind is "database" or "bucket".
	Kind string `json:"kind"`
	// Name is the database's or bucket's name.
	Name string `json:"name"`
	// Namespace holds its volume and credentials on the runtime.
	Namespace string `json:"namespace"`
	// Retained says it was deleted with retain: only its volume and credentials remain.
	Retained bool `json:"retained,omitempty"`
	// Volumes name its volume claims, with their size, e.g. "data-db-0 (1Gi)".
	Volumes []string `json:"volumes,omitempty"`
}

// KubernetesRuntime is a cluster in the compute space.
type KubernetesRuntime = Object[KubernetesRuntimeSpec, KubernetesRuntimeStatus]

// EnvVar is one environment variable.
type EnvVar struct {
	// Name is the variable name.
	Name string `json:"name"`
	// Value is the variable value.
	Value string `json:"value"`
}

// ContainerPort is a port a container listens on.
type ContainerPort struct {
	// Name is an optional IANA_SVC_NAME.
	Name string `json:"name,omitempty"`
	// ContainerPort is the port number, 1-65535.
	ContainerPort int32 `json:"container_port"`
	// Protocol is TCP (default), UDP or SCTP.
	Protocol string `json:"protocol,omitempty"`
}

// ResourceList is an amount of compute resources.
type ResourceList struct {
	// CPU is a Kubernetes quantity, e.g. "250m".
	CPU string `json:"cpu,omitempty"`
	// Memory is a Kubernetes quantity, e.g. "256Mi".
	Memory string `json:"memory,omitempty"`
}

// Resources are a container's requests and limits.
type Resources struct {
	// Requests is what the scheduler reserves.
	Requests ResourceList `json:"requests,omitzero"`
	// Limits caps what the container may use.
	Limits ResourceList `json:"limits,omitzero"`
}

// Probe is a liveness or readiness check. Exactly one of HTTPGetPath, TCPPort or Exec is set.
type Probe struct {
	// HTTPGetPath is the path of an HTTP GET check on Port.
	HTTPGetPath string `json:"http_get_path,omitempty"`
	// Port is the port of an HTTP or TCP check.
	Port int32 `json:"port,omitempty"`
	// TCP makes the check a TCP connect to Port.
	TCP bool `json:"tcp,omitempty"`
	// Exec is a command run in the container.
	Exec []string `json:"exec,omitempty"`
	// InitialDelaySeconds before the first check.
	InitialDelaySeconds int32 `json:"initial_delay_seconds,omitempty"`
	// PeriodSeconds between checks.
	PeriodSeconds int32 `json:"period_seconds,omitempty"`
}

// Container is one container of a workload.
type Container struct {
	// Name is a DNS-1123 label, unique within the workload.
	Name string `json:"name"`
	// Image is an OCI image reference.
	Image string `json:"image"`
	// Command overrides the image entrypoint.
	Command []string `json:"command,omitempty"`
	// Args are the arguments to the entrypoint.
	Args []string `json:"args,omitempty"`
	// Ports are the ports the container listens on.
	Ports []ContainerPort `json:"ports,omitempty"`
	// Env are environment variables.
	Env []EnvVar `json:"env,omitempty"`
	// Resources are requests and limits.
	Resources *Resources `json:"resources,omitempty"`
	// LivenessProbe restarts the container when it fails.
	LivenessProbe *Probe `json:"liveness_probe,omitempty"`
	// ReadinessProbe gates traffic until it passes.
	ReadinessProbe *Probe `json:"readiness_probe,omitempty"`
}

// HelmSource is a Helm chart to render.
type HelmSource struct {
	// Repository is a chart repository URL; empty when Chart is a local path.
	Repository string `json:"repository,omitempty"`
	// Chart is the chart name in Repository or, with no Repository, a chart directory or archive in the
	// control plane's chart directory, by a path relative to it (local charts are read from there only).
	Chart string `json:"chart"`
	// Version is the chart version; the latest when empty.
	Version string `json:"version,omitempty"`
	// Values is a YAML document of chart values.
	Values string `json:"values,omitempty"`
}

// Autoscaling bounds a HorizontalPodAutoscaler.
type Autoscaling struct {
	// MinReplicas is the lower bound, at least 1.
	MinReplicas int32 `json:"min_replicas"`
	// MaxReplicas is the upper bound, at least MinReplicas.
	MaxReplicas int32 `json:"max_replicas"`
	// TargetCPUPercent is the average CPU utilization target, 1-100 (default 80).
	TargetCPUPercent int32 `json:"target_cpu_percent,omitempty"`
}

// WorkloadDefinitionSpec says what to run. Exactly one of Containers, Manifests or Helm is set.
type WorkloadDefinitionSpec struct {
	// Containers run as one Deployment (with a Service when ports are declared).
	Containers []Container `json:"containers,omitempty"`
	// Manifests is a multi-document YAML of Kubernetes objects.
	Manifests string `json:"manifests,omitempty"`
	// Helm is a chart to render.
	Helm *HelmSource `json:"helm,omitempty"`
	// Replicas is the default replica count (default 1).
	Replicas *int32 `json:"replicas,omitempty"`
	// Autoscaling, when set, renders a HorizontalPodAutoscaler.
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`
	// ClusterScoped lets the definition's manifests or chart hold cluster-scoped objects (ClusterRoles,
	// CustomResourceDefinitions, other Namespaces) and objects in namespaces other than the instance's.
	// Without it such objects fail the instance, naming them. Only an admin token may set it.
	ClusterScoped bool `json:"cluster_scoped,omitempty"`
}

// WorkloadDefinitionStatus is the observed state of a definition.
type WorkloadDefinitionStatus struct {
	Status
	// Instances counts the instances of this definition.
	Instances int `json:"instances"`
}

// WorkloadDefinition says what to run.
type WorkloadDefinition = Object[WorkloadDefinitionSpec, WorkloadDefinitionStatus]

// WorkloadInstanceSpec says where and how to run a definition.
type WorkloadInstanceSpec struct {
	// DefinitionID is the workload definition to run.
	DefinitionID string `json:"definition_id"`
	// RuntimeID pins the instance to one kubernetes runtime, which it never fails over from. At most one
	// of RuntimeID and Placement is set; with neither, the instance runs only where the instances that
	// use it with placement with_consumers run.
	RuntimeID string `json:"runtime_id,omitempty"`
	// Placement places the instance across regions on matching runtimes, provisioned from runtime
	// profiles where none exists.
	Placement *Placement `json:"placement,omitempty"`
	// Namespace is the Kubernetes namespace; derived from the instance name when empty.
	Namespace string `json:"namespace,omitempty"`
	// Replicas overrides the definition's replica count.
	Replicas *int32 `json:"replicas,omitempty"`
	// Env adds or overrides environment variables in every container.
	Env []EnvVar `json:"env,omitempty"`
	// Images overrides the image per container name.
	Images map[string]string `json:"images,omitempty"`
	// Uses are other instances this one uses: each is rolled out first on every runtime this one runs on
	// (placed there by QleetOS with placement with_consumers, else it must be placed there by its own
	// spec), and this one gets <PREFIX>_HOST, <PREFIX>_PORT and <PREFIX>_URL for it. A used instance
	// cannot be deleted while used.
	Uses []Use `json:"uses,omitempty"`
	// Databases are databases the instance uses (by id), beyond those that name it: each is Ready on the
	// instance's runtimes before it rolls out, and cannot be deleted while used.
	Databases []string `json:"databases,omitempty"`
	// Buckets are buckets the instance uses (by id), likewise.
	Buckets []string `json:"buckets,omitempty"`
	// Adopt lets the instance take over objects that already exist in the cluster without QleetOS's
	// ownership (a namespace, a ConfigMap named by a manifest). Without it the instance goes Failed and
	// names such an object; with it the object is labelled as the instance's, and pruned or deleted with it.
	// Objects of another QleetOS instance are never taken over.
	Adopt bool `json:"adopt,omitempty"`
}

// AppliedObject is one Kubernetes object an instance applied, and how it is doing.
type AppliedObject struct {
	// APIVersion of the object.
	APIVersion string `json:"api_version"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped objects.
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
	// Ready reports whether the object is available.
	Ready bool `json:"ready"`
	// Message explains why it is not ready.
	Message string `json:"message,omitempty"`
	// Runtime names the runtime the object is on, in an instance's top-level list when it is placed on
	// more than one.
	Runtime string `json:"runtime,omitempty"`
}

// WorkloadInstanceStatus is the observed state of an instance.
type WorkloadInstanceStatus struct {
	Status
	// Namespace is the namespace the instance runs in.
	Namespace string `json:"namespace,omitempty"`
	// DefinitionGeneration is the generation of the workload definition that was last applied. With the
	// phase Ready, it says that the instance has rolled out that generation.
	DefinitionGeneration int64 `json:"definition_generation,omitempty"`
	// Replicas is the desired replica count summed over the instance's workloads.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas counts ready pods.
	ReadyReplicas int32 `json:"ready_replicas"`
	// AvailableReplicas counts available pods.
	AvailableReplicas int32 `json:"available_replicas"`
	// Objects are the applied Kubernetes objects, on every runtime.
	Objects []AppliedObject `json:"objects,omitempty"`
	// Dependencies are the objects the instance consumes beyond its spec's references (the secrets that
	// serve it): they are Ready before it rolls out, and a change of theirs rolls it. Deleting one
	// removes it from the instance.
	Dependencies []ObjectRef `json:"dependencies,omitempty"`
	// Placements are the runtimes the instance runs on (one for a pinned runtime), each with its own
	// replicas, phase and objects. The instance is Ready when every placement is.
	Placements []PlacementStatus `json:"placements,omitempty"`
}

// WorkloadInstance says where and how to run a definition.
type WorkloadInstance = Object[WorkloadInstanceSpec, WorkloadInstanceStatus]

func init() {
	RegisterKind(KindDef[KubernetesRuntimeSpec, KubernetesRuntimeStatus]{
		Kind:        KindKubernetesRuntime,
		Title:       "Kubernetes runtime",
		ShortNames:  []string{"runtime"},
		Description: "A Kubernetes cluster in the compute space that workloads run on: a `local` cluster (kubesim, run by `qleet server`), a cluster you bring by `kubeconfig`, or an `eks` cluster that QleetOS provisions with a cloud account (IAM roles, a VPC with subnets unless `subnet_ids` are given, the cluster and a managed node group, all tagged with the runtime's ownership). It is Ready once the control plane has connected to the cluster and found Ready nodes; deleting it deletes what QleetOS made in AWS, in reverse. The kubeconfig is write-only.",
		Default:     defaultKubernetesRuntime,
		Validate:    validateKubernetesRuntime,
		Refs:        kubernetesRuntimeRefs,
		WriteOnly:   []string{"kubeconfig"},
	})
}

func init() {
	RegisterKind(KindDef[WorkloadDefinitionSpec, WorkloadDefinitionStatus]{
		Kind:        KindWorkloadDefinition,
		Title:       "workload definition",
		ShortNames:  []string{"definition"},
		Description: "What to run: containers (one Deployment, with a Service when ports are declared), raw Kubernetes manifests, or a Helm chart, with a default replica count and optional autoscaling. Exactly one of `containers`, `manifests` and `helm` is set. Where it runs is a workload instance.",
		Default:     defaultWorkloadDefinition,
		Validate:    validateWorkloadDefinition,
	})
}

func init() {
	RegisterKind(KindDef[WorkloadInstanceSpec, WorkloadInstanceStatus]{
		Kind:         KindWorkloadInstance,
		Title:        "workload instance",
		ShortNames:   []string{"instance"},
		Description:  "Where and how to run a workload definition: a pinned Kubernetes runtime or a placement across regions, the namespace, and overrides of replicas, environment and images. It is Ready once the workload is rolled out and Ready everywhere it is placed.",
		Validate:     validateWorkloadInstance,
		Refs:         workloadInstanceRefs,
		ValidateRefs: validateWorkloadInstanceRefs,
		StatusRefs:   workloadInstanceStatusRefs,
	})
}
