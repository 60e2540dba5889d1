// Command goclient shows the QleetOS Go client: it declares a workload definition, waits until the control
// plane reports it reconciled, and prints what happened to it. The client needs only the API: it pulls in
// no Kubernetes module.
//
//	QLEET_ENDPOINT=http://127.0.0.1:8080 QLEET_TOKEN=$(cat .qleet-demo/data/admin.token) go run ./examples/goclient
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := client.New(os.Getenv("QLEET_ENDPOINT"), client.WithToken(os.Getenv("QLEET_TOKEN")))
	if err == nil {
		err = run(ctx, c, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goclient:", err)
		os.Exit(1)
	}
}

// run creates (or finds) the definition "hello", waits for it, and prints its events.
func run(ctx context.Context, c *client.Client, out io.Writer) error {
	defs := c.WorkloadDefinitions()
	def, err := defs.Create(ctx, &api.WorkloadDefinition{
		Meta: api.Meta{Name: "hello"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}},
	})
	if api.IsConflict(err) { // declared before: use it
		def, err = defs.GetByName(ctx, "hello")
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "workload_definition %q is %s (generation %d)\n", def.Name, def.ID, def.Generation)

	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	def, err = defs.WaitReconciled(wctx, def.ID) // Ready at the current generation, or a typed error
	if err != nil {
		return fmt.Errorf("waiting for %q: %w", "hello", err)
	}
	fmt.Fprintf(out, "reconciled: %s\n", def.Status.Phase)

	events, err := defs.Events(ctx, def.ID)
	if err != nil {
		return err
	}
	for _, e := range events {
		fmt.Fprintf(out, "%s %s: %s (x%d)\n", e.Type, e.Reason, e.Message, max(e.Count, 1))
	}
	return nil
}
