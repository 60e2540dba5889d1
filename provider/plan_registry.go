package provider

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// A Terraform plan asks each resource for its plan separately (PlanResourceChange, where ModifyPlan
// previews the change), independent resources concurrently, and all in one provider process. What one
// resource's preview cannot see by itself is what the others create, change or delete in the same run:
// the runtime_profile an instance created with it will be provisioned from, or the instance a gateway
// created with it routes to. The plan registry keeps, per configured client (one per provider
// configuration and Terraform walk), the change each resource's plan has made so far, and every preview
// sends the others' changes along as the plan request's assume. Terraform plans a resource after those
// it references or names in depends_on, so a consumer's preview sees its providers.
//
// At apply, Terraform plans each resource again just before applying it; a change applied is forgotten,
// since the API has it from then on.

// planRegistries holds a *planRegistry per *client.Client.
var planRegistries sync.Map

// planRegistry is the changes the resources of one run have planned, by key (see changeKey).
type planRegistry struct {
	mu      sync.Mutex
	changes map[string]api.PlanChange
	order   []string
}

// registryOf returns the plan registry of a configured client.
func registryOf(c *client.Client) *planRegistry {
	r, _ := planRegistries.LoadOrStore(c, &planRegistry{changes: map[string]api.PlanChange{}})
	return r.(*planRegistry)
}

// changeKey names the object a change is about: its id, or for a create, its name.
func changeKey(ch api.PlanChange) string {
	if ch.Op == api.PlanCreate {
		return ch.Kind + "/name:" + ch.Name
	}
	return ch.Kind + "/" + ch.ID
}

// plannedID is the placeholder id a create is given in the registry, by which the previews of the
// resources that reference it name it.
func plannedID(kind, name string) string { return "planned:" + kind + "/" + name }

func (r *planRegistry) record(ch api.PlanChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := changeKey(ch)
	if _, ok := r.changes[k]; !ok {
		r.order = append(r.order, k)
	}
	r.changes[k] = ch
}

func (r *planRegistry) forget(ch api.PlanChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.changes, changeKey(ch))
}

// others returns the recorded changes but the one about the same object as ch, in the order recorded.
func (r *planRegistry) others(ch api.PlanChange) []api.PlanChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	self := changeKey(ch)
	var out []api.PlanChange
	for _, k := range r.order {
		if c, ok := r.changes[k]; ok && k != self {
			out = append(out, c)
		}
	}
	return out
}

// resolveUnknown replaces the references of ch that are known only after apply (knownForPreview's
// markers) by the placeholder of the create they must name: the only create of the referenced kind
// that others record. A reference with no such create, or several, stays unknown: the preview then
// says nothing about it rather than guess.
func resolveUnknown(ch api.PlanChange, others []api.PlanChange) api.PlanChange {
	ki, ok := api.LookupKind(ch.Kind)
	if !ok || len(ch.Spec) == 0 {
		return ch
	}
	spec := ki.NewSpec()
	if json.Unmarshal(ch.Spec, spec) != nil {
		return ch
	}
	to := map[string]string{}
	for _, ref := range ki.Refs(spec) {
		if !strings.HasPrefix(ref.ID, api.PlanUnknownPrefix) {
			continue
		}
		var found []string
		for _, o := range others {
			if o.Op == api.PlanCreate && o.Kind == ref.Kind {
				found = append(found, o.ID)
			}
		}
		if len(found) == 1 {
			to[ref.ID] = found[0]
		}
	}
	if len(to) == 0 {
		return ch
	}
	var v any
	if json.Unmarshal(ch.Spec, &v) != nil {
		return ch
	}
	out, err := json.Marshal(replaceStrings(v, to))
	if err != nil {
		return ch
	}
	ch.Spec = out
	return ch
}

// replaceStrings replaces, in a decoded JSON value, every string that is a key of to.
func replaceStrings(v any, to map[string]string) any {
	switch v := v.(type) {
	case string:
		if r, ok := to[v]; ok {
			return r
		}
		return v
	case []any:
		for i := range v {
			v[i] = replaceStrings(v[i], to)
		}
		return v
	case map[string]any:
		for k := range v {
			v[k] = replaceStrings(v[k], to)
		}
		return v
	default:
		return v
	}
}

// unknownMarker is the stand-in knownForPreview gives an unknown reference at an attribute path, e.g.
// "unknown:uses[0].instance_id": unique per place, so that each can be resolved on its own.
func unknownMarker(steps []string) string {
	return api.PlanUnknownPrefix + strings.Join(steps, "")
}

func stepString(first bool, name string, index int64, isIndex bool) string {
	switch {
	case isIndex:
		return fmt.Sprintf("[%d]", index)
	case first:
		return name
	default:
		return "." + name
	}
}
