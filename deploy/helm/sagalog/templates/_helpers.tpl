{{/* The labels every object of a release carries. */}}
{{- define "sagalog.labels" -}}
app.kubernetes.io/name: sagalog
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The labels that select one service's pods: (dict "root" $ "service" name). */}}
{{- define "sagalog.selector" -}}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .service }}
{{- end }}

{{- define "sagalog.secretName" -}}
{{- default (printf "%s-secrets" .Release.Name) .Values.secrets.existingSecret -}}
{{- end }}

{{/* The connection every service shares (SAGALOG_*), and its own login as principal
     `name`: (dict "root" $ "name" principal). */}}
{{- define "sagalog.connection" -}}
{{- $k := .root.Values.kafka -}}
- name: SAGALOG_BOOTSTRAP_SERVERS
  value: {{ $k.bootstrapServers | quote }}
- name: SAGALOG_SCHEMA_REGISTRY_URL
  value: {{ $k.schemaRegistryUrl | quote }}
- name: SAGALOG_REPLICATION_FACTOR
  value: {{ $k.replicationFactor | quote }}
- name: SAGALOG_MIN_INSYNC_REPLICAS
  value: {{ $k.minInsyncReplicas | quote }}
- name: SAGALOG_SECURITY_PROTOCOL
  value: {{ $k.securityProtocol | quote }}
{{- if $k.userSecretName }}
- name: SAGALOG_SASL_MECHANISM
  value: {{ $k.saslMechanism | quote }}
- name: SAGALOG_SASL_USERNAME
  value: {{ .name | quote }}
- name: SAGALOG_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ replace "{name}" .name $k.userSecretName | quote }}
      key: password
{{- end }}
{{- if $k.caSecretName }}
- name: SAGALOG_SSL_CA_LOCATION
  value: /etc/sagalog/ca/ca.crt
{{- end }}
- name: SAGALOG_HEALTH_PORT
  value: {{ .root.Values.healthPort | quote }}
- name: SAGALOG_HEALTH_HOST
  value: "0.0.0.0"
{{- end }}

{{/* Liveness, readiness and startup probes on the health endpoints at `port`. */}}
{{- define "sagalog.probes" -}}
startupProbe:
  httpGet: {path: /health/live, port: {{ .port }}}
  periodSeconds: 5
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /health/live, port: {{ .port }}}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /health/ready, port: {{ .port }}}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
{{- end }}

{{- define "sagalog.caVolume" -}}
{{- if .Values.kafka.caSecretName }}
- name: cluster-ca
  secret:
    secretName: {{ .Values.kafka.caSecretName | quote }}
{{- end }}
{{- end }}

{{- define "sagalog.caMount" -}}
{{- if .Values.kafka.caSecretName }}
- name: cluster-ca
  mountPath: /etc/sagalog/ca
  readOnly: true
{{- end }}
{{- end }}

{{- define "sagalog.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  fsGroup: 10001
{{- end }}
