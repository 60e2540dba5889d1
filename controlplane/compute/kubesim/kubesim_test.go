package kubesim_test

import (
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

func TestStartAndStop(t *testing.T) {
	c := kubesimtest.Start(t, kubesimtest.WithName("launcher"), kubesimtest.WithNodes(1))
	if c.Name != "launcher" || !strings.HasPrefix(c.Endpoint, "https://127.0.0.1:") {
		t.Errorf("cluster = %+v", c)
	}
	if b, err := os.ReadFile(c.Kubeconfig); err != nil || !strings.Contains(string(b), c.Endpoint) {
		t.Errorf("kubeconfig %s does not name %s (err %v)", c.Kubeconfig, c.Endpoint, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := syscall.Kill(c.PID, 0); err == nil {
		t.Errorf("pid %d still exists after Stop", c.PID)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("Wait after a clean stop: %v", err)
	}
}

func TestStartFailureCarriesTheCause(t *testing.T) {
	bin, err := kubesimtest.Binary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	_, err = kubesim.Start(context.Background(), kubesim.Config{Binary: bin, DataDir: t.TempDir(), Port: port})
	if err == nil || !strings.Contains(err.Error(), "is in use") {
		t.Fatalf("Start on a busy port: err = %v, want one naming the busy port", err)
	}
}
