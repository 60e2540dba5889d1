{{/* qleet.name is the chart name, or nameOverride. */}}
{{- define "qleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* qleet.fullname prefixes every object: fullnameOverride, else <release>-<name> (the release alone when it holds the name). */}}
{{- define "qleet.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else if contains (include "qleet.name" .) .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "qleet.name" .) | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* qleet.labels are the labels of every object; call with (dict "ctx" $ "component" "api"). */}}
{{- define "qleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{ include "qleet.selectorLabels" . }}
{{- end }}

{{/* qleet.selectorLabels select one component's pods; call with (dict "ctx" $ "component" "api"). */}}
{{- define "qleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "qleet.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* qleet.image is the qleet image reference. */}}
{{- define "qleet.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* qleet.apiHost is the API Service's in-cluster DNS name; qleet.apiEndpoint its URL. */}}
{{- define "qleet.apiHost" -}}
{{ include "qleet.fullname" . }}-api.{{ .Release.Namespace }}.svc
{{- end }}
{{- define "qleet.apiEndpoint" -}}
https://{{ include "qleet.apiHost" . }}:{{ .Values.api.port }}
{{- end }}

{{/* qleet.natsURL lists every NATS node by its stable name; clients learn the cluster from any of them. */}}
{{- define "qleet.natsURL" -}}
{{- $full := include "qleet.fullname" . }}
{{- $urls := list }}
{{- range $i := until (int .Values.nats.replicas) }}
{{- $urls = append $urls (printf "nats://%s-nats-%d.%s-nats-headless.%s.svc:4222" $full $i $full $.Release.Namespace) }}
{{- end }}
{{- join "," $urls }}
{{- end }}

{{/* Secret names and keys: the chart's own Secret unless an existing one is given. */}}
{{- define "qleet.databaseSecret" -}}
{{ default (printf "%s-database" (include "qleet.fullname" .)) .Values.postgresql.existingSecret }}
{{- end }}
{{- define "qleet.databaseSecretKey" -}}
{{ ternary .Values.postgresql.existingSecretKey "url" (ne .Values.postgresql.existingSecret "") }}
{{- end }}
{{- define "qleet.secretKeySecret" -}}
{{ default (printf "%s-secret-key" (include "qleet.fullname" .)) .Values.secretKey.existingSecret }}
{{- end }}
{{- define "qleet.secretKeySecretKey" -}}
{{ ternary .Values.secretKey.existingSecretKey "key" (ne .Values.secretKey.existingSecret "") }}
{{- end }}
{{- define "qleet.controllerSecret" -}}
{{ default (printf "%s-controller-token" (include "qleet.fullname" .)) .Values.controller.existingSecret }}
{{- end }}
{{- define "qleet.controllerSecretKey" -}}
{{ ternary .Values.controller.existingSecretKey "token" (ne .Values.controller.existingSecret "") }}
{{- end }}
{{- define "qleet.agentSecret" -}}
{{- if .Values.agent.existingSecret }}{{ .Values.agent.existingSecret }}
{{- else if .Values.agent.token }}{{ include "qleet.fullname" . }}-agent-token
{{- else }}{{ include "qleet.controllerSecret" . }}
{{- end }}
{{- end }}
{{- define "qleet.agentSecretKey" -}}
{{- if .Values.agent.existingSecret }}{{ .Values.agent.existingSecretKey }}
{{- else if .Values.agent.token }}token
{{- else }}{{ include "qleet.controllerSecretKey" . }}
{{- end }}
{{- end }}
{{- define "qleet.tlsSecret" -}}
{{ default (printf "%s-api-tls" (include "qleet.fullname" .)) .Values.tls.secretName }}
{{- end }}

{{/* qleet.validate fails the render on values that cannot work together; the schema checks each alone. */}}
{{- define "qleet.validate" -}}
{{- $pg := .Values.postgresql }}
{{- if and $pg.url $pg.existingSecret }}{{ fail "postgresql: give url or existingSecret, not both" }}{{ end }}
{{- if not (or $pg.url $pg.existingSecret) }}{{ fail "postgresql: url or existingSecret is required (the API replicas share one PostgreSQL database)" }}{{ end }}
{{- $sk := .Values.secretKey }}
{{- if and $sk.key $sk.existingSecret }}{{ fail "secretKey: give key or existingSecret, not both" }}{{ end }}
{{- if not (or $sk.key $sk.existingSecret) }}{{ fail "secretKey: key or existingSecret is required (API replicas must share the key that encrypts secrets at rest)" }}{{ end }}
{{- $c := .Values.controller }}
{{- if and $c.token $c.existingSecret }}{{ fail "controller: give token or existingSecret, not both" }}{{ end }}
{{- if not (or $c.token $c.existingSecret) }}{{ fail "controller: token or existingSecret is required (a controller-role API token)" }}{{ end }}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) }}{{ fail "tls.certManager.issuerRef.name: required when tls.certManager.enabled" }}{{ end }}
{{- $a := .Values.agent }}
{{- if and $a.enabled (not $a.runtime) }}{{ fail "agent.runtime: required when agent.enabled (the kubernetes_runtime this cluster is)" }}{{ end }}
{{- if and $a.token $a.existingSecret }}{{ fail "agent: give token or existingSecret, not both" }}{{ end }}
{{- end }}

{{/* qleet.podSecurity is the pod-level security context and pull secrets of every pod. */}}
{{- define "qleet.podSecurity" -}}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- end }}

{{/* qleet.dnsEgress is the egress rule every component needs: DNS. */}}
{{- define "qleet.dnsEgress" -}}
- ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
{{- end }}
