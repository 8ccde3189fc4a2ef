{{- define "wisp-bridge.fullname" -}}
{{ .Release.Name }}-wisp-bridge
{{- end }}

{{- define "wisp-bridge.selectorLabels" -}}
app.kubernetes.io/name: wisp-bridge
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "wisp-bridge.labels" -}}
{{ include "wisp-bridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
