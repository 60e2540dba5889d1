package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// Removing a dependency (a qleet_database, a qleet_bucket, a used qleet_workload_instance) and the
// references to it in one apply: Terraform's apply graph has the users' update depend on the
// dependency's delete (checked with terraform 1.5.7 and 1.11: `terraform graph -plan` shows the edge
// "instance -> database (destroy)"), so the delete runs first, while the users still list it, and the
// API refuses it (409, listing them). Waiting for the users to drop it cannot work: their update starts
// only once the delete has returned. So the delete, when every dependent that blocks it is a workload
// instance that lists it (databases, buckets or uses), first removes it from them: exactly what their
// update, next in the same apply, would do.

// releaseUsers handles a delete refused because of its dependents (err): when each is a workload instance
// that lists the object in databases, buckets or uses, it removes the object from them and returns their
// names and true, so that the delete can be sent again. Otherwise it changes nothing and returns false.
func (r *objectResource[S, T, M]) releaseUsers(ctx context.Context, id string, err error) ([]string, bool) {
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeConflict || len(ae.Dependents) == 0 {
		return nil, false
	}
	insts := r.c.WorkloadInstances()
	var users []*api.WorkloadInstance
	for _, d := range ae.Dependents {
		if d.Kind != api.KindWorkloadInstance {
			return nil, false
		}
		inst, err := insts.Get(ctx, d.ID)
		if err != nil || !release(&inst.Spec, id) {
			return nil, false
		}
		users = append(users, inst)
	}
	var names []string
	for _, u := range users {
		for attempt := 0; ; attempt++ {
			_, err := insts.Update(ctx, u)
			if err == nil {
				break
			}
			if !api.IsConflict(err) || attempt >= 3 {
				return nil, false
			}
			// Changed meanwhile (a controller's status write does not count, a user's edit does): again,
			// on the latest spec.
			if u, err = insts.Get(ctx, u.ID); err != nil || !release(&u.Spec, id) {
				return nil, false
			}
		}
		names = append(names, fmt.Sprintf("workload_instance %q", u.Name))
	}
	return names, true
}

// release removes id from the instance's databases, buckets and uses, and reports whether it was there.
func release(s *api.WorkloadInstanceSpec, id string) bool {
	n := len(s.Databases) + len(s.Buckets) + len(s.Uses)
	s.Databases = slices.DeleteFunc(s.Databases, func(d string) bool { return d == id })
	s.Buckets = slices.DeleteFunc(s.Buckets, func(b string) bool { return b == id })
	s.Uses = slices.DeleteFunc(s.Uses, func(u api.Use) bool { return u.InstanceID == id })
	return len(s.Databases)+len(s.Buckets)+len(s.Uses) < n
}
