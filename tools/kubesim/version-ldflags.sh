#!/bin/sh
# Prints the -ldflags that stamp the Kubernetes version into kubesim, so that the API server reports
# the real version (e.g. v1.31.4) instead of v0.0.0-master. The version comes from go.mod.
cd "$(dirname "$0")"
v=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' go.mod)
maj=$(echo "$v" | sed 's/^v\([0-9]*\)\..*/\1/')
min=$(echo "$v" | sed 's/^v[0-9]*\.\([0-9]*\)\..*/\1/')
pkg=k8s.io/component-base/version
printf '%s' "-X $pkg.gitVersion=$v -X $pkg.gitMajor=$maj -X $pkg.gitMinor=$min -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
