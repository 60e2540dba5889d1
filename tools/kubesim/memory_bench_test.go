package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// memory sums RSS and PSS (kB) over a kubesim and all its descendants.
// RSS counts the pages of the shared kubesim binary once per process; PSS
// shares them out, so it is what the cluster really costs.
func memory(pid int) (rssKB, pssKB int) {
	for _, p := range append([]int{pid}, descendants(pid)...) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				continue
			}
			n, _ := strconv.Atoi(fields[1])
			switch fields[0] {
			case "Rss:":
				rssKB += n
			case "Pss:":
				pssKB += n
			}
		}
		f.Close()
	}
	return rssKB, pssKB
}

// BenchmarkCluster reports start-to-ready time and the memory of one idle
// 3-node cluster, then of the same cluster running 100 pods.
//
//	go test -run '^$' -bench BenchmarkCluster -benchtime 1x .
func BenchmarkCluster(b *testing.B) {
	for i := 0; i < b.N; i++ {
		start := time.Now()
		p := startKubesim(b, b.TempDir())
		b.ReportMetric(time.Since(start).Seconds(), "ready-s")
		cs := p.client(b)
		time.Sleep(20 * time.Second) // let start-up garbage be collected
		rss, pss := memory(p.cmd.Process.Pid)
		b.ReportMetric(float64(rss)/1024, "idle-rss-MB")
		b.ReportMetric(float64(pss)/1024, "idle-pss-MB")
		ctx := context.Background()
		if _, err := cs.AppsV1().Deployments("default").Create(ctx, newDeployment("hundred", 100), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		eventually(b, 5*time.Minute, "100 pods Available", deploymentAvailable(cs, "default", "hundred", 100))
		time.Sleep(20 * time.Second)
		rss, pss = memory(p.cmd.Process.Pid)
		b.ReportMetric(float64(rss)/1024, "100pods-rss-MB")
		b.ReportMetric(float64(pss)/1024, "100pods-pss-MB")
		p.stop(b)
	}
}

// BenchmarkThreeClusters starts three 3-node clusters at once and reports
// the time until all are ready and their memory together.
//
//	go test -run '^$' -bench ThreeClusters -benchtime 1x .
func BenchmarkThreeClusters(b *testing.B) {
	for i := 0; i < b.N; i++ {
		start := time.Now()
		procs := make([]*proc, 3)
		var wg sync.WaitGroup
		for j := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				procs[j] = startKubesim(b, b.TempDir(), "--name", fmt.Sprintf("c%d", j))
			}()
		}
		wg.Wait()
		for _, p := range procs {
			if p == nil {
				b.FailNow()
			}
		}
		b.ReportMetric(time.Since(start).Seconds(), "all-ready-s")
		var rss, pss int
		for _, p := range procs {
			r, s := memory(p.cmd.Process.Pid)
			rss, pss = rss+r, pss+s
		}
		b.ReportMetric(float64(rss)/1024, "rss-MB")
		b.ReportMetric(float64(pss)/1024, "pss-MB")
		for _, p := range procs {
			p.stop(b)
		}
	}
}
