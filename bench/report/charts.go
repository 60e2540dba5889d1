package report

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Charts draws the PNG charts into dir and returns their file names: apply-to-ready distributions per
// N, throughput against concurrency, and the scale section's curves.
func Charts(dir string, res *Results) ([]string, error) {
	var names []string
	var errs []error
	add := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		if name != "" {
			names = append(names, name)
		}
	}
	ns := map[int]bool{}
	for _, r := range res.Apply {
		ns[r.N] = true
	}
	var nList []int
	for n := range ns {
		nList = append(nList, n)
	}
	sort.Ints(nList)
	for _, n := range nList {
		add(applyChart(dir, res, n))
	}
	if len(res.Throughput) > 0 {
		add(throughputChart(dir, res))
	}
	if s := res.Scale; s != nil {
		if len(s.ReconciledSeries) > 1 {
			add(seriesChart(dir, "scale-reconciled.png", "Scale: instances reconciled after the first create", "seconds", "instances reconciled", s.ReconciledSeries))
		}
		if len(s.RSSSeries) > 1 {
			add(seriesChart(dir, "scale-rss.png", "Scale: process RSS through the scale section", "seconds", "RSS (MB)", s.RSSSeries))
		}
		if len(s.ChurnSamplesMS) > 0 && len(s.DirectSamplesMS) > 0 {
			add(boxChart(dir, "scale-churn-latency.png", "Under churn: create-to-ready (ms)",
				[]string{"QleetOS create-to-reconciled", "direct client-go apply-to-Available"},
				[][]float64{s.ChurnSamplesMS, s.DirectSamplesMS}))
		}
	}
	if res.Sim != nil {
		for _, c := range simCostCharts {
			add(simCostChart(dir, res.Sim, c))
		}
	}
	return names, errors.Join(errs...)
}

// simCostFigure is one cost-growth chart of the sim section: a figure at rest and under churn.
type simCostFigure struct {
	name, title, yLabel string
	rest, churn         func(SimRow) float64
}

var simCostCharts = []simCostFigure{
	{"sim-cost-reconciles.png", "Simulation: instance reconciles per second", "reconciles / s",
		func(r SimRow) float64 { return r.SteadyReconcilesPerS }, func(r SimRow) float64 { return r.ChurnReconcilesPerS }},
	{"sim-cost-cpu.png", "Simulation: CPU of the control plane (harness process)", "CPU cores",
		func(r SimRow) float64 { return r.SteadyCPUCores }, func(r SimRow) float64 { return r.ChurnCPUCores }},
	{"sim-cost-rss.png", "Simulation: RSS of the harness process (mean)", "RSS (MB)",
		func(r SimRow) float64 { return r.SteadyRSSMB }, func(r SimRow) float64 { return r.ChurnRSSMB }},
}

// simCostChart draws one figure against the instance count (log scale), one line per backend at rest
// and one under churn. It draws nothing when fewer than two sizes were measured on any backend.
func simCostChart(dir string, s *SimResult, f simCostFigure) (string, error) {
	var order []string
	by := map[string]plotter.XYs{}
	sizes := map[int]bool{}
	line := func(label string, x int, y float64) {
		if _, ok := by[label]; !ok {
			order = append(order, label)
		}
		by[label] = append(by[label], plotter.XY{X: float64(x), Y: y})
	}
	for _, r := range s.Rows {
		n := s.RowInstances(r)
		if r.Skipped != "" || n <= 0 || r.SteadyWindowS == 0 {
			continue
		}
		sizes[n] = true
		backend, _, _ := strings.Cut(r.Backend, ",")
		line(backend+", at rest", n, f.rest(r))
		if r.ChurnWindowS > 0 {
			line(fmt.Sprintf("%s, %.0f updates/s", backend, s.UpdateRate), n, f.churn(r))
		}
	}
	if len(sizes) < 2 {
		return "", nil
	}
	p := plot.New()
	p.Title.Text = f.title
	p.X.Label.Text = "instances"
	p.Y.Label.Text = f.yLabel
	p.X.Scale = plot.LogScale{}
	var ticks plot.ConstantTicks
	var xs []int
	for n := range sizes {
		xs = append(xs, n)
	}
	sort.Ints(xs)
	for _, n := range xs {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	var args []any
	for _, l := range order {
		args = append(args, l, by[l])
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return "", err
	}
	p.X.Tick.Marker = ticks
	// From zero, with a band above the data for the legend.
	p.Y.Min = 0
	p.Y.Max = max(p.Y.Max*1.4, 0.01)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return f.name, p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, f.name))
}

func applyChart(dir string, res *Results, n int) (string, error) {
	var labels []string
	var samples [][]float64
	runs := false
	for _, r := range res.Apply {
		runs = runs || r.Run > 1
	}
	for _, r := range res.Apply {
		if r.N == n && r.Skipped == "" && len(r.SamplesMS) > 0 {
			label := r.Method[:1]
			if runs {
				label = fmt.Sprintf("%s run %d", label, r.Run)
			}
			labels = append(labels, label)
			samples = append(samples, r.SamplesMS)
		}
	}
	if len(samples) == 0 {
		return "", nil
	}
	return boxChart(dir, fmt.Sprintf("apply-latency-n%d.png", n),
		fmt.Sprintf("Apply to ready, N=%d (ms; a client-go, b kubectl, c API wait, d Go client)", n), labels, samples)
}

func boxChart(dir, name, title string, labels []string, samples [][]float64) (string, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "ms"
	for i, s := range samples {
		vals := make(plotter.Values, len(s))
		copy(vals, s)
		box, err := plotter.NewBoxPlot(vg.Points(40), float64(i), vals)
		if err != nil {
			return "", err
		}
		p.Add(box)
	}
	p.NominalX(labels...)
	p.Add(plotter.NewGrid())
	return name, p.Save(vg.Length(max(5, 2*len(labels)))*vg.Inch, 4*vg.Inch, filepath.Join(dir, name))
}

func throughputChart(dir string, res *Results) (string, error) {
	p := plot.New()
	p.Title.Text = "Write throughput by concurrency"
	p.X.Label.Text = "concurrency"
	p.Y.Label.Text = "operations / s"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{}
	var ticks plot.ConstantTicks
	seen := map[int]bool{}
	var order []string
	by := map[string]plotter.XYs{}
	for _, r := range res.Throughput {
		if r.Skipped != "" || r.OpsPerSec <= 0 {
			continue
		}
		if !seen[r.Concurrency] {
			seen[r.Concurrency] = true
			ticks = append(ticks, plot.Tick{Value: float64(r.Concurrency), Label: fmt.Sprint(r.Concurrency)})
		}
		if _, ok := by[r.Target]; !ok {
			order = append(order, r.Target)
		}
		by[r.Target] = append(by[r.Target], plotter.XY{X: float64(r.Concurrency), Y: r.OpsPerSec})
	}
	var args []any
	for _, t := range order {
		args = append(args, t, by[t])
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return "", err
	}
	p.X.Tick.Marker = ticks
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	name := "throughput.png"
	return name, p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, name))
}

func seriesChart(dir, name, title, xLabel, yLabel string, pts []Point) (string, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	xys := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		xys[i] = plotter.XY{X: pt.T, Y: pt.V}
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return "", err
	}
	p.Add(line, plotter.NewGrid())
	return name, p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, name))
}
