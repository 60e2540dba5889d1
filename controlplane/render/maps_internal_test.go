package render

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// mapCases are definitions and instances that, together, set every field of the API that
// renderContainers reads (TestMapCasesCoverTheAPI checks that).
func mapCases() []struct {
	name string
	def  *api.WorkloadDefinition
	inst *api.WorkloadInstance
} {
	return []struct {
		name string
		def  *api.WorkloadDefinition
		inst *api.WorkloadInstance
	}{
		{"the test definition", containersDef(nil), instance(nil)},
		{"no ports, so no service; replicas from the instance", containersDef(func(s *api.WorkloadDefinitionSpec) {
			s.Containers = []api.Container{{Name: "worker", Image: "busybox:1.36", Command: []string{"/bin/sh", "-c"}, Args: []string{"run"}}}
		}), instance(func(s *api.WorkloadInstanceSpec) { s.Replicas = ptr(int32(5)) })},
		{"autoscaling, exec probes, UDP, instance image and env overrides", containersDef(func(s *api.WorkloadDefinitionSpec) {
			s.Replicas = nil
			s.Autoscaling = &api.Autoscaling{MinReplicas: 2, MaxReplicas: 9, TargetCPUPercent: 65}
			s.Containers = []api.Container{{
				Name: "dns", Image: "coredns:1.11",
				Ports:          []api.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: "UDP"}, {ContainerPort: 9153, Protocol: "TCP"}},
				Env:            []api.EnvVar{{Name: "A", Value: "1"}, {Name: "EMPTY", Value: ""}},
				Resources:      &api.Resources{Limits: api.ResourceList{Memory: "1.5Gi"}},
				LivenessProbe:  &api.Probe{Exec: []string{"cat", "/ok"}, InitialDelaySeconds: 3, PeriodSeconds: 7},
				ReadinessProbe: &api.Probe{HTTPGetPath: "/ready", Port: 8181, InitialDelaySeconds: 1},
			}}
		}), instance(func(s *api.WorkloadInstanceSpec) {
			s.Images = map[string]string{"dns": "coredns:1.12"}
			s.Env = []api.EnvVar{{Name: "A", Value: "2"}, {Name: "B", Value: "3"}}
		})},
		{"autoscaling with the default target, a probe with no action", containersDef(func(s *api.WorkloadDefinitionSpec) {
			s.Autoscaling = &api.Autoscaling{MinReplicas: 1, MaxReplicas: 3}
			s.Containers[0].LivenessProbe = &api.Probe{PeriodSeconds: 2}
			s.Containers[0].Resources = &api.Resources{Requests: api.ResourceList{CPU: "0.5", Memory: "128974848"}}
		}), instance(nil)},
	}
}

// TestRenderedMapsAreTheConvertersOutput: the maps renderContainers writes field by field are exactly
// what runtime.DefaultUnstructuredConverter makes of the same typed objects, without status and nulls.
func TestRenderedMapsAreTheConvertersOutput(t *testing.T) {
	t.Parallel()
	for _, c := range mapCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			typed, err := typedContainers(c.def, c.inst, "ns-1")
			require.NoError(t, err)
			got, err := renderContainers(c.def, c.inst, "ns-1")
			require.NoError(t, err)
			require.Len(t, got, len(typed))
			for i, obj := range typed {
				want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
				require.NoError(t, err)
				delete(want, "status")
				require.Equal(t, dropNulls(want), got[i].Object, "%T", obj)
			}
		})
	}
}

// TestMapCasesCoverTheAPI fails when a field of the API that renderContainers may read is set by none of
// mapCases, so that a new field cannot be forgotten by the map functions unnoticed.
func TestMapCasesCoverTheAPI(t *testing.T) {
	t.Parallel()
	set := map[reflect.Type]map[string]bool{}
	var mark func(v reflect.Value)
	mark = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				mark(v.Elem())
			}
		case reflect.Slice:
			for i := range v.Len() {
				mark(v.Index(i))
			}
		case reflect.Struct:
			if set[v.Type()] == nil {
				set[v.Type()] = map[string]bool{}
			}
			for i := range v.NumField() {
				if !v.Field(i).IsZero() {
					set[v.Type()][v.Type().Field(i).Name] = true
				}
				mark(v.Field(i))
			}
		}
	}
	for _, c := range mapCases() {
		mark(reflect.ValueOf(c.def.Spec.Containers))
		mark(reflect.ValueOf(c.def.Spec.Autoscaling))
	}
	for _, v := range []any{api.Container{}, api.ContainerPort{}, api.EnvVar{}, api.Resources{}, api.ResourceList{}, api.Probe{}, api.Autoscaling{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			require.True(t, set[typ][typ.Field(i).Name], "no case sets %s.%s", typ.Name(), typ.Field(i).Name)
		}
	}
}

// BenchmarkContainerMaps: the test definition's Deployment and Service built and turned into maps by the
// reflection-based converter (what renderContainers did) and by the map functions (what it does).
func BenchmarkContainerMaps(b *testing.B) {
	def, inst := containersDef(nil), instance(nil)
	b.Run("converter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			typed, err := typedContainers(def, inst, "ns-1")
			if err != nil {
				b.Fatal(err)
			}
			for _, obj := range typed {
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
				if err != nil {
					b.Fatal(err)
				}
				delete(m, "status")
				dropNulls(m)
			}
		}
	})
	b.Run("maps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := renderContainers(def, inst, "ns-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
