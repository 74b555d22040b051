{{/* What the nsstuck container and the migration containers share: image, environment, mounts. */}}

{{- define "nsstuck.databaseEnv" -}}
{{- $engine := include "nsstuck.databaseEngine" . -}}
- name: NSSTUCK_DATABASE_URL
{{- if .Values.database.existingSecret }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.existingSecretKey }}
{{- else if .Values.database.url }}
  valueFrom:
    secretKeyRef:
      name: {{ include "nsstuck.fullname" . }}
      key: NSSTUCK_DATABASE_URL
{{- else }}
  value: {{ include "nsstuck.sqliteUrl" . | quote }}
{{- end }}
{{- end -}}

{{- define "nsstuck.slackEnv" -}}
{{- $s := .Values.slack -}}
{{- if $s.existingSecret }}
- name: SLACK_BOT_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ $s.existingSecret }}, key: SLACK_BOT_TOKEN}
- name: SLACK_SIGNING_SECRET
  valueFrom:
    secretKeyRef: {name: {{ $s.existingSecret }}, key: SLACK_SIGNING_SECRET, optional: true}
- name: SLACK_APP_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ $s.existingSecret }}, key: SLACK_APP_TOKEN, optional: true}
{{- else }}
{{- range $key, $value := dict "SLACK_BOT_TOKEN" $s.botToken "SLACK_SIGNING_SECRET" $s.signingSecret "SLACK_APP_TOKEN" $s.appToken }}
{{- if $value }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef: {name: {{ include "nsstuck.fullname" $ }}, key: {{ $key }}}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "nsstuck.commonEnv" -}}
- name: NSSTUCK_CONFIG
  value: {{ printf "%s/nsstuck.yaml" (include "nsstuck.configDir" .) | quote }}
- name: NSSTUCK_HTTP_PORT
  value: "3000"
- name: NSSTUCK_METRICS_PORT
  value: "9090"
{{ include "nsstuck.databaseEnv" . }}
- name: NSSTUCK_LOG_LEVEL
  value: {{ .Values.logging.level | quote }}
- name: NSSTUCK_LOG_FORMAT
  value: {{ .Values.logging.format | quote }}
{{- range $key := keys .Values.env | sortAlpha }}
- name: {{ $key }}
  value: {{ get $.Values.env $key | toString | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* /tmp: the Kubernetes client writes the CA and client certificates of kubeconfigs there. */}}
{{- define "nsstuck.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}
