// Package helm holds the QleetOS Helm chart (deploy/helm/qleet: the API and controller Deployments, a
// NATS JetStream cluster, and the in-cluster agent) and the tests that render it with the Helm SDK and
// apply it to a kubesim cluster.
package helm
