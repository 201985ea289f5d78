{{- define "gpu-portal.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-portal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpu-portal.labels" -}}
app.kubernetes.io/name: {{ include "gpu-portal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: web, worker, beat, collector, migrate. */}}
{{- define "gpu-portal.selector" -}}
app.kubernetes.io/name: {{ include "gpu-portal.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpu-portal.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The Secret and ConfigMap processes read ({root, migrate}): the migration Job's copies
(hooks) when migrate. */}}
{{- define "gpu-portal.secretName" -}}
{{- $copy := ternary "migrate-secret" "secret" .migrate -}}
{{- .root.Values.existingSecret | default (printf "%s-%s" (include "gpu-portal.fullname" .root) $copy) -}}
{{- end -}}

{{- define "gpu-portal.configName" -}}
{{- include "gpu-portal.fullname" .root }}-{{ ternary "migrate-config" "config" .migrate -}}
{{- end -}}

{{/* The migration Job's copies: made before it, deleted once every hook succeeded (kept when it
failed, for a look at what it read). */}}
{{- define "gpu-portal.migrateCopy" -}}
helm.sh/hook: pre-install,pre-upgrade
helm.sh/hook-weight: "-10"
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end -}}

{{/* The ServiceAccount of a component that talks to the API server. */}}
{{- define "gpu-portal.serviceAccount" -}}
{{- $given := get (.root.Values.serviceAccounts.names | default dict) .component -}}
{{- $given | default (printf "%s-%s" (include "gpu-portal.fullname" .root) .component) -}}
{{- end -}}

{{/* Whether the worker binds the web's tenant role in each tenant namespace: only where its
admission policy keeps the bindings it may write to that one (else "", and the role is bound
cluster-wide). */}}
{{- define "gpu-portal.bindsPerTenant" -}}
{{- if and .Values.rbac.create .Values.rbac.workerPolicy }}true{{ end -}}
{{- end -}}

{{/* The ClusterRole the web reads tenant namespaces with: the worker binds it in each. */}}
{{- define "gpu-portal.webTenantRole" -}}
{{- printf "%s-%s-web-tenant" (include "gpu-portal.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* Settings shared by every process ({root, migrate}): the ConfigMap, the Secret's keys,
extra env. */}}
{{- define "gpu-portal.env" -}}
{{- $secret := include "gpu-portal.secretName" . -}}
envFrom:
  - configMapRef:
      name: {{ include "gpu-portal.configName" . }}
env:
  {{- range $key := list "SECRET_KEY" "DATABASE_URL" "REDIS_URL" }}
  - name: {{ $key }}
    valueFrom:
      secretKeyRef: {name: {{ $secret }}, key: {{ $key }}}
  {{- end }}
  # Earlier secret keys, still accepted for what they signed (optional in an existing Secret).
  - name: SECRET_KEY_FALLBACKS
    valueFrom:
      secretKeyRef: {name: {{ $secret }}, key: SECRET_KEY_FALLBACKS, optional: true}
  {{- if .root.Values.oidc.enabled }}
  - name: OIDC_CLIENT_SECRET
    valueFrom:
      secretKeyRef: {name: {{ $secret }}, key: OIDC_CLIENT_SECRET}
  {{- end }}
  {{- with .root.Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* Pod-level settings every component shares. */}}
{{- define "gpu-portal.podSpec" -}}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir: {sizeLimit: 256Mi}
{{- end -}}

{{/* Container-level settings every component shares (the image is read-only: /tmp is scratch). */}}
{{- define "gpu-portal.container" -}}
{{ include "gpu-portal.containerFor" (dict "root" . "migrate" false) }}
{{- end -}}

{{/* A process's container ({root, migrate}). */}}
{{- define "gpu-portal.containerFor" -}}
image: {{ include "gpu-portal.image" .root }}
imagePullPolicy: {{ .root.Values.image.pullPolicy }}
securityContext:
  {{- toYaml .root.Values.securityContext | nindent 2 }}
volumeMounts:
  - {name: tmp, mountPath: /tmp}
{{ include "gpu-portal.env" . }}
{{- end -}}

{{- define "gpu-portal.metricsAnnotations" -}}
{{- if and .Values.metrics.enabled .Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}
