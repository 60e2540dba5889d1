package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlanAction(t *testing.T) {
	t.Run("a provision names the region and the profile", func(t *testing.T) {
		a := PlanAction{Action: ActionProvision, Kind: KindKubernetesRuntime, Name: "default-eu-west", Region: "eu-west", Profile: "default", Reason: "no runtime matches"}
		require.Equal(t, `provision kubernetes_runtime "default-eu-west" in eu-west from runtime_profile "default": no runtime matches`, a.String())
	})
	t.Run("an install names the type and the runtime", func(t *testing.T) {
		a := PlanAction{Action: ActionInstall, Kind: KindSupportService, Name: "ingress-a", SupportType: SupportIngress, Runtime: "a"}
		require.Equal(t, `install support_service "ingress-a" (ingress) on kubernetes_runtime "a"`, a.String())
	})
	t.Run("implied actions leave out the requested ones", func(t *testing.T) {
		p := PlanResult{Actions: []PlanAction{{Action: ActionCreate, Requested: true, Name: "web"}, {Action: ActionInstall, Name: "ingress-a"}}}
		require.Equal(t, []PlanAction{{Action: ActionInstall, Name: "ingress-a"}}, p.Implied())
	})
}

func TestChangeOf(t *testing.T) {
	def := &WorkloadDefinition{Meta: Meta{ID: "d1", Name: "web"}, Spec: WorkloadDefinitionSpec{Containers: []Container{{Name: "web", Image: "nginx"}}}}
	ch, err := ChangeOf(PlanUpdate, KindWorkloadDefinition, def)
	require.NoError(t, err)
	require.Equal(t, "d1", ch.ID)
	var spec WorkloadDefinitionSpec
	require.NoError(t, json.Unmarshal(ch.Spec, &spec))
	require.Equal(t, "nginx", spec.Containers[0].Image)

	del, err := ChangeOf(PlanDelete, KindWorkloadDefinition, def)
	require.NoError(t, err)
	require.Nil(t, del.Spec, "a delete sends no spec")
}

func TestPlanSummary(t *testing.T) {
	p := PlanResult{Actions: []PlanAction{
		{Action: ActionCreate, Kind: KindWorkloadInstance, Name: "web", Requested: true},
		{Action: ActionProvision, Kind: KindKubernetesRuntime, Name: "default-eu-west", Region: "eu-west", Profile: "default"},
		{Action: ActionDepend, Kind: KindWorkloadInstance, Name: "web"},
		{Action: ActionInstall, Kind: KindSupportService, Name: "ingress-a", SupportType: SupportIngress, Runtime: "a"},
		{Action: ActionInstall, Kind: KindSupportService, Name: "ingress-b", SupportType: SupportIngress, Runtime: "b"},
		{Action: ActionInstall, Kind: KindSupportService, Name: "cert-manager-a", SupportType: SupportCertManager, Runtime: "a"},
		{Action: ActionRemove, Kind: KindSupportService, Name: "ingress-c", SupportType: SupportIngress, Runtime: "c"},
		{Action: ActionRoll, Kind: KindWorkloadInstance, Name: "api", Reason: "its secret changes"},
	}, Warnings: []string{"nothing serves ap-south"}}
	require.Equal(t, []string{
		`will provision kubernetes_runtime "default-eu-west" in eu-west from runtime_profile "default"`,
		`will install support_service ingress, cert-manager on kubernetes_runtime "a"`,
		`will install support_service ingress on kubernetes_runtime "b"`,
		`will remove support_service ingress from kubernetes_runtime "c"`,
		`will roll workload_instance "api" (its secret changes)`,
		`note: nothing serves ap-south`,
	}, p.Summary())
}
