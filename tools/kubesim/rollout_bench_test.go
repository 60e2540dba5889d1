package main

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkRollout300 measures how fast kwok brings pods to Running and
// Ready: one 300-replica Deployment per iteration, on a fresh 3-node
// cluster, timed from create to Available. It reports pods/s.
//
//	go test -run '^$' -bench Rollout300 -benchtime 1x .
func BenchmarkRollout300(b *testing.B) {
	const replicas = 300
	p := startKubesim(b, b.TempDir())
	cs := p.client(b)
	ctx := context.Background()
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		name := "bulk-" + time.Now().Format("150405.000000")[7:]
		start := time.Now()
		if _, err := cs.AppsV1().Deployments("default").Create(ctx, newDeployment(name, replicas), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		eventually(b, 5*time.Minute, "deployment Available", deploymentAvailable(cs, "default", name, replicas))
		total += time.Since(start)
		b.StopTimer()
		_ = cs.AppsV1().Deployments("default").Delete(ctx, name, metav1.DeleteOptions{})
		b.StartTimer()
	}
	b.ReportMetric(float64(replicas*b.N)/total.Seconds(), "pods/s")
}
