package api

// ImageChange is the body of the image hook (POST /v1/workload_definitions/{id}/image): the one
// container whose image changes, and its new image.
type ImageChange struct {
	// Container names the container whose image changes.
	Container string `json:"container"`
	// Image is the new image reference, e.g. nginx:1.27.
	Image string `json:"image"`
}

// ImageChanged is the image hook's answer.
type ImageChanged struct {
	// Definition is the updated workload definition.
	Definition *WorkloadDefinition `json:"definition"`
	// UpdatedInstances are the definition's instances, which roll out the new image.
	UpdatedInstances []ObjectRef `json:"updated_instances"`
}
