package awssim

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
)

// NodegroupLabel is the label the stand-in puts on the kubesim nodes it
// makes for an EKS node group, as EKS does.
const NodegroupLabel = "eks.amazonaws.com/nodegroup"

// kubeBackend is an EKS cluster's endpoint: an HTTPS server that checks EKS
// tokens and forwards to the cluster's kubesim with its admin credentials.
type kubeBackend struct {
	sim     *Sim
	name    string
	account string
	dataDir string

	ln  net.Listener
	srv *http.Server
	url string

	cancel context.CancelFunc
	done   chan struct{} // closed when start-up has ended, well or not

	mu        sync.Mutex
	ready     bool
	err       error
	isStopped bool
	kc        *kubesim.Cluster
	proxy     *httputil.ReverseProxy
	clientset kubernetes.Interface
	scaleMu   sync.Mutex // one node scaling at a time
	stopOnce  sync.Once
	stopErr   error
}

// startKubeLocked serves the cluster's endpoint and, with Config.Kubesim,
// starts its kubesim in the background.
func (s *Sim) startKubeLocked(c *eksCluster) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	b := &kubeBackend{sim: s, name: c.Name, account: c.account, ln: ln, url: "https://" + ln.Addr().String(), done: make(chan struct{})}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{s.tlsCert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = b.srv.ServeTLS(ln, "", "") }()
	c.kube = b
	if !s.cfg.Kubesim {
		b.ready = true
		close(b.done)
		return nil
	}
	b.dataDir = filepath.Join(s.dataDir, "eks", c.account, c.region, c.Name)
	ctx, cancel := context.WithTimeout(context.Background(), kubesim.DefaultStartTimeout)
	b.cancel = cancel
	go b.start(ctx, c.region)
	return nil
}

func (b *kubeBackend) start(ctx context.Context, region string) {
	defer close(b.done)
	defer b.cancel()
	err := func() error {
		if err := os.MkdirAll(b.dataDir, 0o700); err != nil {
			return err
		}
		kc, err := kubesim.Start(ctx, kubesim.Config{Binary: b.sim.cfg.KubesimBinary, DataDir: b.dataDir, Name: b.name,
			Region: region, Nodes: 1, Stderr: b.sim.cfg.KubesimStderr})
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.kc = kc
		b.mu.Unlock()
		cfg, err := clientcmd.BuildConfigFromFlags("", kc.Kubeconfig)
		if err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		pcfg := rest.CopyConfig(cfg)
		pcfg.NextProtos = []string{"http/1.1"} // upgrades (exec, port-forward) need HTTP/1.1 to kubesim
		rt, err := rest.TransportFor(pcfg)
		if err != nil {
			return fmt.Errorf("transport: %w", err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		target, err := url.Parse(kc.Endpoint)
		if err != nil {
			return err
		}
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = target.Host
			},
			Transport:     rt,
			FlushInterval: -1, // watches stream
		}
		b.mu.Lock()
		b.proxy, b.clientset, b.ready = proxy, cs, true
		b.mu.Unlock()
		return nil
	}()
	if err != nil {
		b.mu.Lock()
		b.err = fmt.Errorf("kubesim for EKS cluster %s: %w", b.name, err)
		b.mu.Unlock()
	}
}

// readiness reports whether the cluster serves, or why it never will.
func (b *kubeBackend) readiness() (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready, b.err
}

func (b *kubeBackend) endpoint() string { return b.url }

func (b *kubeBackend) caData() string { return base64.StdEncoding.EncodeToString(b.sim.caPEM) }

func (b *kubeBackend) stopped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.isStopped
}

// stopKubeLocked stops the cluster's endpoint and kubesim in the
// background; stopped() turns true when they are gone.
func (s *Sim) stopKubeLocked(c *eksCluster) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.shutdown(ctx)
	}()
}

// shutdown stops the endpoint and kubesim and removes the cluster's data,
// once; later calls return the first one's error.
func (c *eksCluster) shutdown(ctx context.Context) error {
	b := c.kube
	if b == nil {
		return nil
	}
	b.stopOnce.Do(func() { b.stopErr = b.stop(ctx) })
	return b.stopErr
}

func (b *kubeBackend) stop(ctx context.Context) error {
	if b.cancel != nil {
		b.cancel()
	}
	<-b.done
	var errs []error
	b.mu.Lock()
	kc := b.kc
	b.mu.Unlock()
	if kc != nil {
		errs = append(errs, kc.Stop(ctx))
	}
	errs = append(errs, b.srv.Shutdown(ctx))
	if b.dataDir != "" {
		errs = append(errs, os.RemoveAll(b.dataDir))
	}
	b.mu.Lock()
	b.isStopped, b.ready = true, false
	b.mu.Unlock()
	return errors.Join(errs...)
}

// kubeStatus writes a Kubernetes Status error, as an API server does.
func kubeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code})
}

// ServeHTTP authenticates an EKS token and forwards the request to kubesim
// as the caller's ARN in group system:masters.
func (b *kubeBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		kubeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized: no bearer token")
		return
	}
	cred, err := b.sim.verifyEKSToken(strings.TrimSpace(tok), b.name)
	if err != nil {
		kubeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized: "+err.Error())
		return
	}
	if cred.account != b.account {
		kubeStatus(w, http.StatusForbidden, "Forbidden", fmt.Sprintf("%s has no access to cluster %s of account %s", cred.ARN, b.name, b.account))
		return
	}
	b.mu.Lock()
	proxy := b.proxy
	b.mu.Unlock()
	if proxy == nil {
		kubeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the stand-in runs no Kubernetes behind this cluster (Config.Kubesim is off, or it is not ready)")
		return
	}
	for k := range r.Header {
		if strings.HasPrefix(k, "Impersonate-") {
			r.Header.Del(k)
		}
	}
	r.Header.Del("Authorization")
	r.Header.Set("Impersonate-User", identityARN(cred.ARN))
	r.Header.Add("Impersonate-Group", "system:masters")
	proxy.ServeHTTP(w, r)
}

// identityARN maps a session ARN to the role ARN EKS uses as the user name.
func identityARN(arn string) string {
	if m := matchAssumed(arn); m != nil {
		return "arn:aws:iam::" + m[1] + ":role/" + m[2]
	}
	return arn
}

// EKSTokenPrefix starts every EKS token.
const EKSTokenPrefix = "k8s-aws-v1."

// verifyEKSToken checks an EKS token for cluster as aws-iam-authenticator
// does: a presigned STS GetCallerIdentity URL for the stand-in, signing the
// x-k8s-aws-id header with the cluster name, no older than
// Config.EKSTokenLifetime. The first check of each token is recorded as an
// sts GetCallerIdentity call with param via=eks-token; the identity is then
// cached until the token expires, so that Kubernetes traffic does not flood
// the call log.
func (s *Sim) verifyEKSToken(token, cluster string) (*credential, error) {
	key := cluster + "\x00" + token
	s.mu.Lock()
	if e, ok := s.tokens[key]; ok && s.now().Before(e.until) {
		s.mu.Unlock()
		return e.cred, nil
	}
	s.mu.Unlock()
	call := Call{Time: s.now(), Service: "sts", Action: "GetCallerIdentity", Params: map[string]string{"via": "eks-token", "cluster": cluster}}
	cred, until, err := s.checkEKSToken(token, cluster, &call)
	if err != nil {
		call.Status, call.Error = http.StatusForbidden, "InvalidToken"
	} else {
		call.Status, call.Account, call.Principal = http.StatusOK, cred.account, cred.ARN
		s.mu.Lock()
		now := s.now()
		for k, e := range s.tokens {
			if !now.Before(e.until) {
				delete(s.tokens, k)
			}
		}
		s.tokens[key] = verifiedToken{cred, until}
		s.mu.Unlock()
	}
	s.record(call)
	return cred, err
}

// verifiedToken is a checked EKS token's identity, good until its expiry.
type verifiedToken struct {
	cred  *credential
	until time.Time
}

// checkEKSToken verifies a token and returns its identity and until when
// the token (and the session behind it) is good.
func (s *Sim) checkEKSToken(token, cluster string, call *Call) (*credential, time.Time, error) {
	enc, ok := strings.CutPrefix(token, EKSTokenPrefix)
	if !ok {
		return nil, time.Time{}, fmt.Errorf("token does not start with %s", EKSTokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "="))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("token is not base64url: %w", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("token is not a URL: %w", err)
	}
	if !s.isOwnHost(u.Host) {
		return nil, time.Time{}, fmt.Errorf("token is presigned for host %q, not this stand-in's STS (%s)", u.Host, s.url)
	}
	qv := u.Query()
	if qv.Get("Action") != "GetCallerIdentity" || qv.Get("Version") != "2011-06-15" || (u.Path != "/" && u.Path != "") {
		return nil, time.Time{}, errors.New("token is not a presigned STS GetCallerIdentity request")
	}
	si, f := parsePresigned(qv)
	if f != nil {
		return nil, time.Time{}, errors.New(f.msg)
	}
	call.AccessKeyID, call.Region = si.accessKey, si.region
	if si.service != "sts" {
		return nil, time.Time{}, fmt.Errorf("token is signed for service %q, not sts", si.service)
	}
	signed := strings.Join(si.signedHeaders, ";")
	if !strings.Contains(";"+signed+";", ";x-k8s-aws-id;") {
		return nil, time.Time{}, errors.New("token does not sign the x-k8s-aws-id header")
	}
	si.expires = s.cfg.EKSTokenLifetime // as aws-iam-authenticator: the date counts, not X-Amz-Expires
	r := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{"X-K8s-Aws-Id": {cluster}}}
	cred, f := s.verify(r, nil, si, false)
	if f != nil {
		return nil, time.Time{}, errors.New(f.msg)
	}
	until := si.amzDate.Add(si.expires)
	if !cred.expires.IsZero() && cred.expires.Before(until) {
		until = cred.expires
	}
	return cred, until, nil
}

// scaleNodesLocked makes the kubesim nodes of a node group match its
// desired size, in the background (a no-op without kubesim).
func (s *Sim) scaleNodesLocked(c *eksCluster, g *nodegroup) {
	b := c.kube
	if b == nil || g.ScalingConfig.DesiredSize == nil {
		return
	}
	b.mu.Lock()
	cs := b.clientset
	b.mu.Unlock()
	if cs == nil {
		return
	}
	want := int(*g.ScalingConfig.DesiredSize)
	name, itype := g.NodegroupName, "t3.medium"
	if len(g.InstanceTypes) > 0 {
		itype = g.InstanceTypes[0]
	}
	labels := map[string]string{}
	for k, v := range g.Labels {
		labels[k] = v
	}
	go func() {
		b.scaleMu.Lock()
		defer b.scaleMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = scaleNodes(ctx, cs, name, itype, labels, want)
	}()
}

// scaleNodes adds or removes kwok nodes labelled with the node group until
// it has want of them; new nodes copy the capacity of a kubesim node.
func scaleNodes(ctx context.Context, cs kubernetes.Interface, group, itype string, labels map[string]string, want int) error {
	all, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var mine []corev1.Node
	var template *corev1.Node
	for i := range all.Items {
		n := &all.Items[i]
		if n.Labels[NodegroupLabel] == group {
			mine = append(mine, *n)
		} else if template == nil {
			template = n
		}
	}
	for i := len(mine) - 1; i >= want; i-- {
		if err := cs.CoreV1().Nodes().Delete(ctx, mine[i].Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if template == nil {
		return nil
	}
	for i := len(mine); i < want; i++ {
		nl := map[string]string{NodegroupLabel: group, "node.kubernetes.io/instance-type": itype, "eks.amazonaws.com/capacityType": "ON_DEMAND"}
		for k, v := range template.Labels {
			if strings.HasPrefix(k, "topology.kubernetes.io/") || k == "kubernetes.io/os" || k == "kubernetes.io/arch" {
				nl[k] = v
			}
		}
		for k, v := range labels {
			nl[k] = v
		}
		name := fmt.Sprintf("%s-%d", group, i)
		nl[corev1.LabelHostname] = name
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nl, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status: corev1.NodeStatus{Capacity: template.Status.Capacity, Allocatable: template.Status.Allocatable,
				NodeInfo: template.Status.NodeInfo},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// isOwnHost reports whether host:port names the stand-in's listener: its
// port on a loopback name or address.
func (s *Sim) isOwnHost(hostport string) bool {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		return false
	}
	h, p, err := net.SplitHostPort(hostport)
	if err != nil || p != port {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
