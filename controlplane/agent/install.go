package agent

import (
	"fmt"
	"strconv"
)

// Image is the container image that runs `qleet agent` in a cluster.
const Image = "ghcr.io/qleetos/qleet:latest"

// InstallNamespace is the namespace the in-cluster agent runs in.
const InstallNamespace = "qleet-system"

// InstallManifests returns the Kubernetes objects (multi-document YAML) that run the agent inside the
// runtime's cluster: a namespace, a service account allowed to read what QleetOS applies and the
// cluster's events, a Secret with the API token, and a one-replica Deployment running
// `qleet agent --runtime <name> --endpoint <endpoint>` with QLEET_TOKEN from the Secret. The token
// should be a controller-role token.
func InstallManifests(runtimeName, endpoint, token string) string {
	q := strconv.Quote
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: qleet-agent
  namespace: %[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: qleet-agent
rules:
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets", "replicasets"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods", "events", "services", "configmaps", "namespaces"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: qleet-agent
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: qleet-agent
subjects:
- kind: ServiceAccount
  name: qleet-agent
  namespace: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: qleet-agent
  namespace: %[1]s
type: Opaque
stringData:
  token: %[2]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: qleet-agent
  namespace: %[1]s
  labels:
    app.kubernetes.io/name: qleet-agent
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: qleet-agent
  template:
    metadata:
      labels:
        app.kubernetes.io/name: qleet-agent
    spec:
      serviceAccountName: qleet-agent
      containers:
      - name: agent
        image: %[3]s
        args: ["agent", "--runtime", %[4]s, "--endpoint", %[5]s]
        env:
        - name: QLEET_TOKEN
          valueFrom:
            secretKeyRef:
              name: qleet-agent
              key: token
        resources:
          requests: {cpu: 50m, memory: 64Mi}
          limits: {memory: 256Mi}
`, InstallNamespace, q(token), Image, q(runtimeName), q(endpoint))
}
