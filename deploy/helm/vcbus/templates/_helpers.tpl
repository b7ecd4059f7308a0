{{/* The release's full name, at most 63 characters. */}}
{{- define "vcbus.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "vcbus.labels" -}}
app.kubernetes.io/part-of: vcbus
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "vcbus.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "vcbus.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "vcbus.fullname" .) -}}
{{- end -}}

{{- define "vcbus.natsUrl" -}}
{{- if .Values.nats.embedded -}}
tls://{{ .Values.nats.name }}.{{ .Release.Namespace }}:4222
{{- else -}}
{{- required "nats.external.url is required when nats.embedded is false" .Values.nats.external.url -}}
{{- end -}}
{{- end -}}

{{- define "vcbus.webhookSecret" -}}
{{- .Values.webhook.certificate.secretName | default (printf "%s-webhook-tls" (include "vcbus.fullname" .)) -}}
{{- end -}}

{{/* The restricted Pod Security profile, for every container of the chart. */}}
{{- define "vcbus.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- /* The CloudEvents source: cloudEventsSource, else /vcbus/clusters/<clusterName>, else
       /vcbus/clusters/<kube-system's uid> (one per cluster, stable), else "" (vcbus's default). */ -}}
{{- define "vcbus.ceSource" -}}
{{- if .Values.cloudEventsSource -}}
{{- .Values.cloudEventsSource -}}
{{- else if .Values.clusterName -}}
{{- printf "/vcbus/clusters/%s" .Values.clusterName -}}
{{- else -}}
{{- with (lookup "v1" "Namespace" "" "kube-system").metadata -}}
{{- printf "/vcbus/clusters/%s" .uid -}}
{{- end -}}
{{- end -}}
{{- end }}
