// Package stats summarises benchmark samples: latency percentiles and throughput.
package stats

import (
	"math"
	"slices"
	"time"
)

// Summary describes a set of latency samples. Durations are in milliseconds so that the JSON results read
// without conversion.
type Summary struct {
	// N is the number of samples.
	N int `json:"n"`
	// P50MS, P90MS and P99MS are nearest-rank percentiles; MaxMS and MinMS the extremes; MeanMS the mean.
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	MinMS  float64 `json:"min_ms"`
	MeanMS float64 `json:"mean_ms"`
}

// Summarize returns the summary of samples (which it does not modify). An empty input gives N=0.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		N:      len(s),
		P50MS:  ms(Percentile(s, 50)),
		P90MS:  ms(Percentile(s, 90)),
		P99MS:  ms(Percentile(s, 99)),
		MaxMS:  ms(s[len(s)-1]),
		MinMS:  ms(s[0]),
		MeanMS: ms(sum / time.Duration(len(s))),
	}
}

// Percentile returns the nearest-rank p-th percentile of sorted samples (0 < p <= 100).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// MS converts samples to milliseconds, e.g. for the JSON results and charts.
func MS(samples []time.Duration) []float64 {
	out := make([]float64, len(samples))
	for i, d := range samples {
		out[i] = ms(d)
	}
	return out
}

// Ratio returns a/b rounded to 3 decimals, or 0 when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(a/b*1000) / 1000
}

// PerSecond returns n events over d as a rate rounded to 2 decimals.
func PerSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(n)/d.Seconds()*100) / 100
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }
