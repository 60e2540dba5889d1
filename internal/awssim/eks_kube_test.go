package awssim_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// eksToken makes a token as `aws eks get-token` does: a presigned STS
// GetCallerIdentity URL that signs the x-k8s-aws-id header.
func eksToken(t *testing.T, f *fixture, cluster string) string {
	t.Helper()
	req, err := sts.NewPresignClient(f.sts).PresignGetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{},
		func(po *sts.PresignOptions) {
			po.ClientOptions = append(po.ClientOptions, sts.WithAPIOptions(
				smithyhttp.AddHeaderValue("x-k8s-aws-id", cluster),
				smithyhttp.AddHeaderValue("X-Amz-Expires", "60"),
			))
		})
	require.NoError(t, err)
	return awssim.EKSTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL))
}

// activeCluster creates a network, roles and a cluster, and waits for ACTIVE.
func activeCluster(t *testing.T, f *fixture, name string) (*ekstypes.Cluster, []string) {
	t.Helper()
	_, subnets := network(t, f)
	_, err := f.eks.CreateCluster(context.Background(), &eks.CreateClusterInput{Name: aws.String(name), RoleArn: aws.String(role(t, f, name+"-cluster")),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets}})
	require.NoError(t, err)
	return waitCluster(t, f, name, ekstypes.ClusterStatusActive), subnets
}

// endpointGet sends GET /version to the cluster endpoint with a bearer token.
func endpointGet(t *testing.T, c *ekstypes.Cluster, token string) int {
	t.Helper()
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(c.CertificateAuthority.Data))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, aws.ToString(c.Endpoint)+"/version", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestEKSTokens(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	f := startSim(t, awssim.Config{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	c, _ := activeCluster(t, f, "prod")
	good := eksToken(t, f, "prod")

	t.Run("the endpoint serves over TLS signed by the cluster's CA, and a valid token passes authentication", func(t *testing.T) {
		// Without kubesim, an authenticated request finds no Kubernetes behind the endpoint.
		require.Equal(t, http.StatusServiceUnavailable, endpointGet(t, c, good))
		calls := f.sim.Calls()
		last := calls[len(calls)-1]
		require.Equal(t, "sts:GetCallerIdentity", last.Service+":"+last.Action)
		require.Equal(t, "eks-token", last.Params["via"])
		require.Equal(t, f.acct.ARN, last.Principal)

		require.Equal(t, http.StatusServiceUnavailable, endpointGet(t, c, good))
		require.Len(t, f.sim.Calls(), len(calls), "a token already verified is not checked with STS again")
	})

	t.Run("missing, malformed, tampered and other-cluster tokens get 401", func(t *testing.T) {
		require.Equal(t, http.StatusUnauthorized, endpointGet(t, c, ""))
		require.Equal(t, http.StatusUnauthorized, endpointGet(t, c, "k8s-aws-v1.not-base64!"))
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(good, awssim.EKSTokenPrefix))
		require.NoError(t, err)
		tampered := awssim.EKSTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "X-Amz-Signature=", "X-Amz-Signature=00", 1)))
		require.Equal(t, http.StatusUnauthorized, endpointGet(t, c, tampered))
		require.Equal(t, http.StatusUnauthorized, endpointGet(t, c, eksToken(t, f, "another-cluster")))
	})

	t.Run("another account's principal gets 403", func(t *testing.T) {
		other, err := f.sim.AddAccount("")
		require.NoError(t, err)
		o := f.withKeys(other.AccessKeyID, other.SecretAccessKey, "")
		require.Equal(t, http.StatusForbidden, endpointGet(t, c, eksToken(t, o, "prod")))
	})

	t.Run("a token older than its 15 minutes gets 401, and a fresh one passes", func(t *testing.T) {
		skew.Store(int64(16 * time.Minute))
		defer skew.Store(0)
		require.Equal(t, http.StatusUnauthorized, endpointGet(t, c, good))
		skew.Store(0)
		require.Equal(t, http.StatusServiceUnavailable, endpointGet(t, c, eksToken(t, f, "prod")))
	})
}

// TestEKSRunsWorkloads is the one kubesim test: an EKS cluster of the
// stand-in is a real Kubernetes control plane behind the EKS endpoint.
func TestEKSRunsWorkloads(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), kubesimtest.StartTimeout)
	defer cancel()
	bin, err := kubesimtest.Binary(ctx)
	require.NoError(t, err)
	start := time.Now()
	f := startSim(t, awssim.Config{Kubesim: true, KubesimBinary: bin, DataDir: t.TempDir()})
	c, subnets := activeCluster(t, f, "apps")
	t.Logf("EKS cluster ACTIVE with kubesim after %s", time.Since(start).Round(time.Millisecond))

	ca, err := base64.StdEncoding.DecodeString(aws.ToString(c.CertificateAuthority.Data))
	require.NoError(t, err)
	kcfg := &rest.Config{Host: aws.ToString(c.Endpoint), BearerToken: eksToken(t, f, "apps"), TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	cs, err := kubernetes.NewForConfig(kcfg)
	require.NoError(t, err)

	t.Run("a Deployment created through the EKS endpoint is watched and runs its pods", func(t *testing.T) {
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{
				Replicas: aws.Int32(2),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
				},
			},
		}
		w, err := cs.AppsV1().Deployments("default").Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		defer w.Stop()
		_, err = cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{})
		require.NoError(t, err)
		select {
		case ev := <-w.ResultChan():
			require.Equal(t, watch.Added, ev.Type, "a watch streams through the endpoint")
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event through the EKS endpoint")
		}
		await.True(t, time.Minute, func() bool {
			d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			require.NoError(t, err)
			return d.Status.ReadyReplicas == 2
		}, "the deployment to have 2 ready replicas")
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, d.Annotations["deployment.kubernetes.io/revision"], "the deployment controller has handled it")
	})

	t.Run("the caller is known to Kubernetes by its ARN", func(t *testing.T) {
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, f.acct.ARN, review.Status.UserInfo.Username)
		require.Contains(t, review.Status.UserInfo.Groups, "system:masters")
	})

	t.Run("a bad token is refused with 401", func(t *testing.T) {
		bad := rest.CopyConfig(kcfg)
		bad.BearerToken = awssim.EKSTokenPrefix + "aHR0cDovL2V4YW1wbGUuY29tLw"
		bcs, err := kubernetes.NewForConfig(bad)
		require.NoError(t, err)
		_, err = bcs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsUnauthorized(err), "want 401, got %v", err)
	})

	t.Run("a node group's desired size becomes kubesim nodes", func(t *testing.T) {
		nodes := func() int {
			l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: awssim.NodegroupLabel + "=workers"})
			require.NoError(t, err)
			return len(l.Items)
		}
		_, err := f.eks.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: aws.String("apps"), NodegroupName: aws.String("workers"),
			NodeRole: aws.String(role(t, f, "apps-node")), Subnets: subnets,
			ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(1), MaxSize: aws.Int32(4), DesiredSize: aws.Int32(2)}})
		require.NoError(t, err)
		waitNodegroup(t, f, "apps", "workers", ekstypes.NodegroupStatusActive)
		await.True(t, time.Minute, func() bool { return nodes() == 2 }, "2 nodes")
		_, err = f.eks.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: aws.String("apps"), NodegroupName: aws.String("workers"),
			ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(3)}})
		require.NoError(t, err)
		waitNodegroup(t, f, "apps", "workers", ekstypes.NodegroupStatusActive)
		await.True(t, time.Minute, func() bool { return nodes() == 3 }, "3 nodes")
	})

	t.Run("deleting the cluster stops its kubesim and endpoint", func(t *testing.T) {
		_, err := f.eks.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String("apps"), NodegroupName: aws.String("workers")})
		require.NoError(t, err)
		waitNodegroup(t, f, "apps", "workers", "")
		_, err = f.eks.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String("apps")})
		require.NoError(t, err)
		waitCluster(t, f, "apps", "")
		_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		require.Error(t, err, "the endpoint is gone with the cluster")
	})
}

func TestEKSClusterFailsWhenKubesimCannotStart(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{Kubesim: true, KubesimBinary: "/nonexistent/kubesim", DataDir: t.TempDir()})
	_, subnets := network(t, f)
	_, err := f.eks.CreateCluster(context.Background(), &eks.CreateClusterInput{Name: aws.String("broken"), RoleArn: aws.String(role(t, f, "broken-cluster")),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets}})
	require.NoError(t, err)
	c := waitCluster(t, f, "broken", ekstypes.ClusterStatusFailed)
	require.NotNil(t, c.Health)
	require.Len(t, c.Health.Issues, 1)
	require.Contains(t, aws.ToString(c.Health.Issues[0].Message), "/nonexistent/kubesim")
}
