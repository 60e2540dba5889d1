package render

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The objects renderContainers builds are turned into unstructured maps field by field, not by
// runtime.DefaultUnstructuredConverter: its reflection walks every field of a Deployment's pod template,
// set or not, and was 6% of the control plane's CPU in make bench's 100,000-instance resync, where every
// reconcile renders. Each function below writes what that converter writes for the fields renderContainers
// sets, without the status and the nulls (dropNulls). TestRenderedMapsAreTheConvertersOutput compares the
// two over definitions that set every field the API has; a field renderContainers starts to set must be
// added here too, or that test fails.

func deploymentMap(d *appsv1.Deployment) map[string]any {
	spec := map[string]any{
		"selector": labelSelectorMap(d.Spec.Selector),
		"strategy": map[string]any{},
		"template": map[string]any{
			"metadata": objectMetaMap(&d.Spec.Template.ObjectMeta),
			"spec":     podSpecMap(&d.Spec.Template.Spec),
		},
	}
	if d.Spec.Replicas != nil {
		spec["replicas"] = int64(*d.Spec.Replicas)
	}
	return map[string]any{
		"apiVersion": d.APIVersion, "kind": d.Kind,
		"metadata": objectMetaMap(&d.ObjectMeta),
		"spec":     spec,
	}
}

func serviceMap(s *corev1.Service) map[string]any {
	ports := make([]any, 0, len(s.Spec.Ports))
	for _, p := range s.Spec.Ports {
		m := map[string]any{"port": int64(p.Port)}
		setString(m, "name", p.Name)
		setString(m, "protocol", string(p.Protocol))
		if tp := intOrStringValue(p.TargetPort); tp != nil && !isZeroIntOrString(p.TargetPort) {
			m["targetPort"] = tp
		}
		ports = append(ports, m)
	}
	spec := map[string]any{}
	if len(ports) > 0 {
		spec["ports"] = ports
	}
	if len(s.Spec.Selector) > 0 {
		spec["selector"] = stringMap(s.Spec.Selector)
	}
	return map[string]any{
		"apiVersion": s.APIVersion, "kind": s.Kind,
		"metadata": objectMetaMap(&s.ObjectMeta),
		"spec":     spec,
	}
}

func hpaMap(h *autoscalingv2.HorizontalPodAutoscaler) map[string]any {
	ref := h.Spec.ScaleTargetRef
	target := map[string]any{"kind": ref.Kind, "name": ref.Name}
	setString(target, "apiVersion", ref.APIVersion)
	spec := map[string]any{"scaleTargetRef": target, "maxReplicas": int64(h.Spec.MaxReplicas)}
	if h.Spec.MinReplicas != nil {
		spec["minReplicas"] = int64(*h.Spec.MinReplicas)
	}
	if len(h.Spec.Metrics) > 0 {
		metrics := make([]any, 0, len(h.Spec.Metrics))
		for _, ms := range h.Spec.Metrics {
			m := map[string]any{"type": string(ms.Type)}
			if r := ms.Resource; r != nil {
				t := map[string]any{"type": string(r.Target.Type)}
				if r.Target.AverageUtilization != nil {
					t["averageUtilization"] = int64(*r.Target.AverageUtilization)
				}
				m["resource"] = map[string]any{"name": string(r.Name), "target": t}
			}
			metrics = append(metrics, m)
		}
		spec["metrics"] = metrics
	}
	return map[string]any{
		"apiVersion": h.APIVersion, "kind": h.Kind,
		"metadata": objectMetaMap(&h.ObjectMeta),
		"spec":     spec,
	}
}

func objectMetaMap(m *metav1.ObjectMeta) map[string]any {
	out := map[string]any{}
	setString(out, "name", m.Name)
	setString(out, "namespace", m.Namespace)
	if len(m.Labels) > 0 {
		out["labels"] = stringMap(m.Labels)
	}
	return out
}

func labelSelectorMap(s *metav1.LabelSelector) map[string]any {
	out := map[string]any{}
	if s != nil && len(s.MatchLabels) > 0 {
		out["matchLabels"] = stringMap(s.MatchLabels)
	}
	return out
}

func podSpecMap(s *corev1.PodSpec) map[string]any {
	cs := make([]any, 0, len(s.Containers))
	for i := range s.Containers {
		cs = append(cs, containerMap(&s.Containers[i]))
	}
	return map[string]any{"containers": cs}
}

func containerMap(c *corev1.Container) map[string]any {
	out := map[string]any{"name": c.Name, "resources": resourcesMap(&c.Resources)}
	setString(out, "image", c.Image)
	setStrings(out, "command", c.Command)
	setStrings(out, "args", c.Args)
	if len(c.Ports) > 0 {
		ports := make([]any, 0, len(c.Ports))
		for _, p := range c.Ports {
			m := map[string]any{"containerPort": int64(p.ContainerPort)}
			setString(m, "name", p.Name)
			setString(m, "protocol", string(p.Protocol))
			ports = append(ports, m)
		}
		out["ports"] = ports
	}
	if len(c.Env) > 0 {
		env := make([]any, 0, len(c.Env))
		for _, e := range c.Env {
			m := map[string]any{"name": e.Name}
			setString(m, "value", e.Value)
			env = append(env, m)
		}
		out["env"] = env
	}
	if p := probeMap(c.LivenessProbe); p != nil {
		out["livenessProbe"] = p
	}
	if p := probeMap(c.ReadinessProbe); p != nil {
		out["readinessProbe"] = p
	}
	return out
}

func resourcesMap(r *corev1.ResourceRequirements) map[string]any {
	out := map[string]any{}
	for name, l := range map[string]corev1.ResourceList{"requests": r.Requests, "limits": r.Limits} {
		if len(l) == 0 {
			continue
		}
		m := make(map[string]any, len(l))
		for k, q := range l {
			m[string(k)] = q.String()
		}
		out[name] = m
	}
	return out
}

func probeMap(p *corev1.Probe) map[string]any {
	if p == nil {
		return nil
	}
	out := map[string]any{}
	switch {
	case p.HTTPGet != nil:
		h := map[string]any{"port": intOrStringValue(p.HTTPGet.Port)}
		setString(h, "path", p.HTTPGet.Path)
		out["httpGet"] = h
	case p.TCPSocket != nil:
		out["tcpSocket"] = map[string]any{"port": intOrStringValue(p.TCPSocket.Port)}
	case p.Exec != nil:
		e := map[string]any{}
		setStrings(e, "command", p.Exec.Command)
		out["exec"] = e
	}
	if p.InitialDelaySeconds != 0 {
		out["initialDelaySeconds"] = int64(p.InitialDelaySeconds)
	}
	if p.PeriodSeconds != 0 {
		out["periodSeconds"] = int64(p.PeriodSeconds)
	}
	return out
}

// intOrStringValue is an IntOrString as its JSON: a number or a string.
func intOrStringValue(v intstr.IntOrString) any {
	if v.Type == intstr.String {
		return v.StrVal
	}
	return int64(v.IntVal)
}

func isZeroIntOrString(v intstr.IntOrString) bool {
	return v.Type == intstr.Int && v.IntVal == 0
}

func setString(m map[string]any, key, v string) {
	if v != "" {
		m[key] = v
	}
}

func setStrings(m map[string]any, key string, v []string) {
	if len(v) == 0 {
		return
	}
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	m[key] = out
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
