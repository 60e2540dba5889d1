package kube

import (
	"net/http"
	"sync/atomic"
)

// RequestCounts counts the requests made to clusters: watches apart from every other call (gets, lists,
// applies, probes). At rest QleetOS makes none but its watches; make bench and the idle test read these.
type RequestCounts struct {
	// Calls counts every request that is not a watch.
	Calls int64
	// Watches counts the watch requests (each stays open for minutes).
	Watches int64
}

// requestCounter is the live form of RequestCounts.
type requestCounter struct {
	calls, watches atomic.Int64
}

func (c *requestCounter) snapshot() RequestCounts {
	if c == nil {
		return RequestCounts{}
	}
	return RequestCounts{Calls: c.calls.Load(), Watches: c.watches.Load()}
}

// countingTransport counts every request it sends.
type countingTransport struct {
	next http.RoundTripper
	n    *requestCounter
}

// RoundTrip counts req and sends it.
func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		t.n.watches.Add(1)
	} else {
		t.n.calls.Add(1)
	}
	return t.next.RoundTrip(req)
}

// Requests returns how many requests this Cluster made so far.
func (cl *Cluster) Requests() RequestCounts { return cl.requests.snapshot() }

// Requests returns how many requests the clusters this Connector opened made so far, closed ones
// included.
func (c *Connector) Requests() RequestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.retired
	for _, cl := range c.byKey {
		n := cl.Requests()
		out.Calls += n.Calls
		out.Watches += n.Watches
	}
	return out
}

// isWatch reports whether req opens a watch.
func isWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}
