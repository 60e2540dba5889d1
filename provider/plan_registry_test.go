package provider

import (
	"encoding/json"
	"testing"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// TestResolveUnknown: an unknown reference names the only create of its kind the run plans; with none,
// or several, it stays unknown.
func TestResolveUnknown(t *testing.T) {
	gw := func() api.PlanChange {
		spec, _ := json.Marshal(api.GatewaySpec{InstanceID: api.PlanUnknownPrefix + "instance_id", Hosts: []string{"a.example.com"}})
		return api.PlanChange{Op: api.PlanCreate, Kind: api.KindGateway, ID: plannedID(api.KindGateway, "web"), Name: "web", Spec: spec}
	}
	inst := func(name string) api.PlanChange {
		return api.PlanChange{Op: api.PlanCreate, Kind: api.KindWorkloadInstance, ID: plannedID(api.KindWorkloadInstance, name), Name: name}
	}
	profile := api.PlanChange{Op: api.PlanCreate, Kind: api.KindRuntimeProfile, ID: plannedID(api.KindRuntimeProfile, "p"), Name: "p"}
	for _, tc := range []struct {
		name   string
		others []api.PlanChange
		want   string
	}{
		{"the only instance created", []api.PlanChange{profile, inst("web")}, "planned:workload_instance/web"},
		{"no instance created", []api.PlanChange{profile}, api.PlanUnknownPrefix + "instance_id"},
		{"two instances created", []api.PlanChange{inst("a"), inst("b")}, api.PlanUnknownPrefix + "instance_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolveUnknown(gw(), tc.others)
			var spec api.GatewaySpec
			if err := json.Unmarshal(got.Spec, &spec); err != nil {
				t.Fatal(err)
			}
			if spec.InstanceID != tc.want || spec.Hosts[0] != "a.example.com" {
				t.Fatalf("instance_id %q (hosts %v), want %q", spec.InstanceID, spec.Hosts, tc.want)
			}
		})
	}
}

// TestPlanRegistry: each client (one provider configuration in one walk) has its own registry; a
// change is recorded once per object, and an applied one is forgotten.
func TestPlanRegistry(t *testing.T) {
	c1, _ := client.New("http://127.0.0.1:1")
	c2, _ := client.New("http://127.0.0.1:1")
	create := api.PlanChange{Op: api.PlanCreate, Kind: api.KindRuntimeProfile, ID: plannedID(api.KindRuntimeProfile, "p"), Name: "p"}
	update := api.PlanChange{Op: api.PlanUpdate, Kind: api.KindWorkloadDefinition, ID: "d-1", Name: "d"}
	registryOf(c1).record(create)
	registryOf(c1).record(create)
	registryOf(c1).record(update)
	self := api.PlanChange{Op: api.PlanCreate, Kind: api.KindWorkloadInstance, Name: "web"}
	if got := registryOf(c1).others(self); len(got) != 2 || got[0].Name != "p" || got[1].ID != "d-1" {
		t.Fatalf("others: %+v", got)
	}
	if got := registryOf(c1).others(update); len(got) != 1 || got[0].Name != "p" {
		t.Fatalf("others of the update itself: %+v", got)
	}
	if got := registryOf(c2).others(self); len(got) != 0 {
		t.Fatalf("another client's registry: %+v", got)
	}
	registryOf(c1).forget(api.PlanChange{Op: api.PlanCreate, Kind: api.KindRuntimeProfile, Name: "p"})
	if got := registryOf(c1).others(self); len(got) != 1 || got[0].ID != "d-1" {
		t.Fatalf("after forgetting the applied create: %+v", got)
	}
}
