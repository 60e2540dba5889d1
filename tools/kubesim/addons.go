package main

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// The add-ons kubesim plays where no container runs: an ingress controller's
// address, cert-manager's certificates, metrics-server's pod metrics, and a
// volume provisioner. Each is a small loop that reads
// the cluster every addonInterval and writes only what differs.

const addonInterval = 500 * time.Millisecond

// ingressControllers are the IngressClass controllers whose part kubesim
// plays: QleetOS's local ingress chart and upstream ingress-nginx.
var ingressControllers = []string{"qleetos.io/ingress", "k8s.io/ingress-nginx"}

// ingressControllerSelector finds the LoadBalancer Service of an installed
// ingress controller.
const ingressControllerSelector = "qleetos.io/ingress-controller=true"

var certificates = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// certValidityIssued is how long the certificates kubesim issues are valid,
// as Let's Encrypt's are.
const certValidityIssued = 90 * 24 * time.Hour

// runAddons runs the add-on loops until ctx ends.
func runAddons(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ca keyPair, log *slog.Logger) {
	t := time.NewTicker(addonInterval)
	defer t.Stop()
	var metricsAt time.Time
	var metrics metricsWriter
	for {
		if time.Since(metricsAt) >= metricsEvery {
			metricsAt = time.Now()
			if err := metrics.sync(ctx, cs, dyn); err != nil && ctx.Err() == nil {
				log.Warn("pod metrics", "err", err)
			}
		}
		if err := syncVolumes(ctx, cs); err != nil && ctx.Err() == nil {
			log.Warn("volumes", "err", err)
		}
		if err := syncIngresses(ctx, cs); err != nil && ctx.Err() == nil {
			log.Warn("ingress addresses", "err", err)
		}
		if err := syncCertificates(ctx, cs, dyn, ca, log); err != nil && ctx.Err() == nil {
			log.Warn("certificates", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// syncIngresses gives every Ingress of a class kubesim plays the address of
// its controller's LoadBalancer Service.
func syncIngresses(ctx context.Context, cs kubernetes.Interface) error {
	classes, err := cs.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	played := map[string]bool{}
	for _, c := range classes.Items {
		if slices.Contains(ingressControllers, c.Spec.Controller) {
			played[c.Name] = true
		}
	}
	if len(played) == 0 {
		return nil
	}
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{LabelSelector: ingressControllerSelector})
	if err != nil {
		return err
	}
	var lb []networkingv1.IngressLoadBalancerIngress
	for _, s := range svcs.Items {
		for _, in := range s.Status.LoadBalancer.Ingress {
			lb = append(lb, networkingv1.IngressLoadBalancerIngress{IP: in.IP, Hostname: in.Hostname})
		}
	}
	if len(lb) == 0 {
		return nil // the controller's Service has no address yet
	}
	ings, err := cs.NetworkingV1().Ingresses("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range ings.Items {
		ing := &ings.Items[i]
		if ing.Spec.IngressClassName == nil || !played[*ing.Spec.IngressClassName] || sameAddresses(ing.Status.LoadBalancer.Ingress, lb) {
			continue
		}
		ing.Status.LoadBalancer.Ingress = lb
		if _, err := cs.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, ing, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("ingress %s/%s: %w", ing.Namespace, ing.Name, err)
		}
	}
	return nil
}

func sameAddresses(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y networkingv1.IngressLoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname
	})
}

// syncCertificates issues every cert-manager Certificate that is not Ready:
// a TLS Secret signed by the cluster CA, owned by the Certificate, and the
// Certificate's Ready condition with its expiry.
func syncCertificates(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ca keyPair, log *slog.Logger) error {
	list, err := dyn.Resource(certificates).Namespace("").List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil // cert-manager's CRDs are not installed
	}
	if err != nil {
		return err
	}
	for i := range list.Items {
		c := &list.Items[i]
		if certReady(c) {
			continue
		}
		if err := issue(ctx, cs, dyn, ca, c); err != nil {
			return fmt.Errorf("certificate %s/%s: %w", c.GetNamespace(), c.GetName(), err)
		}
		log.Info("certificate issued", "certificate", c.GetNamespace()+"/"+c.GetName())
	}
	return nil
}

func certReady(c *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		if cond["type"] == "Ready" && cond["status"] == "True" {
			gen, _ := cond["observedGeneration"].(int64)
			return gen == c.GetGeneration()
		}
	}
	return false
}

func issue(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ca keyPair, c *unstructured.Unstructured) error {
	secretName, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
	commonName, _, _ := unstructured.NestedString(c.Object, "spec", "commonName")
	if secretName == "" {
		return fmt.Errorf("spec.secretName is required")
	}
	if commonName == "" && len(dnsNames) > 0 {
		commonName = dnsNames[0]
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
	}
	leaf, err := signFor(tmpl, &ca, certValidityIssued)
	if err != nil {
		return err
	}
	ctrl := true
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: secretName, Namespace: c.GetNamespace(),
			Annotations:     map[string]string{"cert-manager.io/certificate-name": c.GetName(), "cert-manager.io/issuer-name": issuerName(c)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: c.GetAPIVersion(), Kind: c.GetKind(), Name: c.GetName(), UID: c.GetUID(), Controller: &ctrl}},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       append(append([]byte{}, leaf.CertPEM...), ca.CertPEM...),
			corev1.TLSPrivateKeyKey: leaf.KeyPEM,
			"ca.crt":                ca.CertPEM,
		},
	}
	if _, err := cs.CoreV1().Secrets(secret.Namespace).Update(ctx, secret, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = cs.CoreV1().Secrets(secret.Namespace).Create(ctx, secret, metav1.CreateOptions{})
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	status := map[string]any{
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Ready", "message": "Certificate is up to date and has not expired (issued by kubesim's CA)",
			"lastTransitionTime": now, "observedGeneration": c.GetGeneration(),
		}},
		"notBefore":   leaf.Cert.NotBefore.UTC().Format(time.RFC3339),
		"notAfter":    leaf.Cert.NotAfter.UTC().Format(time.RFC3339),
		"renewalTime": leaf.Cert.NotAfter.Add(-30 * 24 * time.Hour).UTC().Format(time.RFC3339),
		"revision":    int64(1),
	}
	if err := unstructured.SetNestedField(c.Object, status, "status"); err != nil {
		return err
	}
	_, err = dyn.Resource(certificates).Namespace(c.GetNamespace()).UpdateStatus(ctx, c, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed: the next pass looks again
	}
	return err
}

func issuerName(c *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
	return name
}
