package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// instanceConfig is a runtime on the kubesim cluster, a definition and an instance of it.
func instanceConfig(name, kubeconfig, image, instanceExtra string) string {
	return fmt.Sprintf(`
resource "qleet_kubernetes_runtime" "rt" {
  name          = "%[1]s-rt"
  provider_type = "kubeconfig"
  kubeconfig    = file(%[2]s)
  labels        = { suite = %[1]q }
}

resource "qleet_workload_definition" "web" {
  name   = "%[1]s-def"
  labels = { suite = %[1]q }
  containers = [{
    name  = "web"
    image = %[3]q
    ports = [{ container_port = 80 }]
  }]
  replicas = 2
}

resource "qleet_workload_instance" "web" {
  name          = %[1]q
  labels        = { suite = %[1]q }
  definition_id = qleet_workload_definition.web.id
  runtime_id    = qleet_kubernetes_runtime.rt.id
  env           = { MODE = "test" }
  %[4]s
}
`, name, hclString(kubeconfig), image, instanceExtra)
}

// dataSourcesConfig looks the objects of instanceConfig up by id, by name and by label.
func dataSourcesConfig(name string) string {
	return fmt.Sprintf(`
data "qleet_kubernetes_runtime" "by_name" {
  name = qleet_kubernetes_runtime.rt.name
}
data "qleet_workload_definition" "by_id" {
  id = qleet_workload_definition.web.id
}
data "qleet_workload_instance" "by_name" {
  name = qleet_workload_instance.web.name
}
data "qleet_workload_instances" "suite" {
  label_selector = "suite=%[1]s"
  depends_on     = [qleet_workload_instance.web]
}
data "qleet_kubernetes_runtimes" "suite" {
  label_selector = "suite=%[1]s"
  depends_on     = [qleet_kubernetes_runtime.rt]
}
`, name)
}

func TestAccWorkloadInstance(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-wi")
	addr := "qleet_workload_instance.web"
	ctx := context.Background()

	// deployment checks the Deployment the instance runs as, in the cluster, until it matches or a minute passes.
	deployment := func(image string, replicas int32) resource.TestCheckFunc {
		return func(*terraform.State) error {
			return await.Until(ctx, time.Minute, func(ctx context.Context) error {
				d, err := env.kube.AppsV1().Deployments(name).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
					return fmt.Errorf("deployment image = %q, want %q", got, image)
				}
				if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
					return fmt.Errorf("deployment replicas = %v, want %d", d.Spec.Replicas, replicas)
				}
				return nil
			})
		}
	}
	instanceID := func() string {
		inst, err := env.api.WorkloadInstances().GetByName(ctx, name)
		if err != nil {
			t.Fatalf("get instance: %v", err)
		}
		return inst.ID
	}

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: resource.ComposeTestCheckFunc(
			env.checkDestroyed,
			func(*terraform.State) error {
				// The instance's objects are gone from the cluster.
				return await.Until(ctx, time.Minute, func(ctx context.Context) error {
					_, err := env.kube.AppsV1().Deployments(name).Get(ctx, name, metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						return nil
					}
					if err != nil {
						return err
					}
					return fmt.Errorf("deployment %s/%s still exists", name, name)
				})
			},
		),
		Steps: []resource.TestStep{
			{
				Config: instanceConfig(name, env.kubeconfig, "nginx:1.27", ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
					resource.TestCheckResourceAttr(addr, "status.namespace", name),
					resource.TestCheckResourceAttr(addr, "status.ready_replicas", "2"),
					resource.TestCheckNoResourceAttr(addr, "namespace"),
					resource.TestCheckNoResourceAttr(addr, "replicas"),
					resource.TestCheckResourceAttrPair(addr, "definition_id", "qleet_workload_definition.web", "id"),
					deployment("nginx:1.27", 2),
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
			{
				// An image change in the instance's overrides rolls out before apply returns.
				Config: instanceConfig(name, env.kubeconfig, "nginx:1.27", `images = { web = "nginx:1.28" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "images.web", "nginx:1.28"),
					resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
					deployment("nginx:1.28", 2),
				),
			},
			{
				// An image change in the definition reaches the cluster too.
				Config: instanceConfig(name, env.kubeconfig, "nginx:1.29", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: deployment("nginx:1.29", 2),
			},
			{
				// Data sources by id, by name and by label.
				Config: instanceConfig(name, env.kubeconfig, "nginx:1.29", "") + dataSourcesConfig(name),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPair("data.qleet_kubernetes_runtime.by_name", "id", "qleet_kubernetes_runtime.rt", "id"),
					resource.TestCheckResourceAttr("data.qleet_kubernetes_runtime.by_name", "status.phase", "Ready"),
					resource.TestCheckNoResourceAttr("data.qleet_kubernetes_runtime.by_name", "kubeconfig"),
					resource.TestCheckResourceAttr("data.qleet_workload_definition.by_id", "containers.0.image", "nginx:1.29"),
					resource.TestCheckResourceAttrPair("data.qleet_workload_instance.by_name", "id", addr, "id"),
					resource.TestCheckResourceAttr("data.qleet_workload_instances.suite", "items.#", "1"),
					resource.TestCheckResourceAttr("data.qleet_workload_instances.suite", "items.0.name", name),
					resource.TestCheckResourceAttr("data.qleet_kubernetes_runtimes.suite", "items.#", "1"),
				),
			},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true, ImportStateId: name},
			{
				// Drift: replicas set through the API outside Terraform show as a diff, and apply puts them back.
				PreConfig: func() {
					if _, err := env.api.WorkloadInstances().Patch(ctx, instanceID(), map[string]any{"spec": map[string]any{"replicas": 3}}); err != nil {
						t.Fatalf("patch instance: %v", err)
					}
					if err := await.Until(ctx, time.Minute, func(ctx context.Context) error {
						return deployment("nginx:1.29", 3)(nil)
					}); err != nil {
						t.Fatalf("drift did not reach the cluster: %v", err)
					}
				},
				Config: instanceConfig(name, env.kubeconfig, "nginx:1.29", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckNoResourceAttr(addr, "replicas"),
					deployment("nginx:1.29", 2),
				),
			},
		},
	})
}

func TestAccWorkloadInstanceAdopt(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-adopt")
	addr := "qleet_workload_instance.web"
	ctx := context.Background()

	// Someone's namespace, holding their data and a Deployment that happens to bear the instance's name.
	_, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Data: map[string]string{"k": "by hand"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	labels := map[string]string{"app.kubernetes.io/instance": name} // the selector QleetOS renders, so that adopting is valid
	_, err = env.kube.AppsV1().Deployments(name).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "theirs", Image: "busybox"}}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: func(*terraform.State) error {
			ns, err := env.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if err != nil || ns.DeletionTimestamp != nil {
				return fmt.Errorf("the namespace QleetOS did not create was deleted: %w", err)
			}
			cm, err := env.kube.CoreV1().ConfigMaps(name).Get(ctx, "data", metav1.GetOptions{})
			if err != nil || cm.Data["k"] != "by hand" {
				return fmt.Errorf("data put there by hand is gone: %w", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// The existing Deployment is not taken over: apply fails and names it.
				Config:      instanceConfig(name, env.kubeconfig, "nginx:1.27", fmt.Sprintf("namespace = %q", name)),
				ExpectError: regexp.MustCompile(`(?s)Deployment/` + name + `/` + name + `.*not created by QleetOS.*adopt`),
			},
			{
				Config: instanceConfig(name, env.kubeconfig, "nginx:1.27", fmt.Sprintf("namespace = %q\n  adopt = true", name)),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "adopt", "true"),
					resource.TestCheckResourceAttr(addr, "status.phase", "Ready"),
					func(*terraform.State) error {
						d, err := env.kube.AppsV1().Deployments(name).Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							return err
						}
						// Server-side apply: QleetOS now owns the fields it sets; fields only others set stay.
						for _, c := range d.Spec.Template.Spec.Containers {
							if c.Name == "web" && c.Image == "nginx:1.27" {
								return nil
							}
						}
						return fmt.Errorf("adopted deployment has no container web with nginx:1.27: %+v", d.Spec.Template.Spec.Containers)
					},
				),
				ConfigPlanChecks: emptyPlanAfterApply,
			},
		},
	})
}

// Destroying an estate whose cluster died completes: the instance's cleanup is blocked, so the provider
// orphans its objects and warns with what was left behind.
func TestAccWorkloadInstance_clusterDied(t *testing.T) {
	env := testAccEnv(t)
	name := randomName("acc-died")
	sim := kubesimtest.Start(t, kubesimtest.WithName(name), kubesimtest.WithNodes(1))

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		// The destroy completing at all is the check: without orphaning it would wait out its timeout.
		CheckDestroy: env.checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: instanceConfig(name, sim.Kubeconfig, "nginx:1.27", ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("qleet_workload_instance.web", "status.phase", "Ready"),
					func(*terraform.State) error {
						// The cluster dies; the destroy that follows this step must still complete.
						return sim.Stop(context.Background())
					},
				),
			},
		},
	})
}
