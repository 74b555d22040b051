{{/* Names and labels */}}
{{- define "nsstuck.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nsstuck.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "nsstuck.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nsstuck.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The pods of `nsstuck serve` (the migration Job's pods are not theirs: no traffic, no budget). */}}
{{- define "nsstuck.serverSelectorLabels" -}}
{{ include "nsstuck.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end -}}

{{/* The `helm test` pod: not one of nsstuck's pods (no Service, no budget, not under its NetworkPolicy). */}}
{{- define "nsstuck.testLabels" -}}
app.kubernetes.io/name: {{ include "nsstuck.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
{{- end -}}

{{- define "nsstuck.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "nsstuck.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "nsstuck.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "nsstuck.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "nsstuck.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The database: "postgresql" (a URL in values), "external" (an existing Secret: PostgreSQL, the chart
cannot read it) or "sqlite" (a sqlite URL, or nothing: a file on the pod's volume).
*/}}
{{- define "nsstuck.databaseEngine" -}}
{{- $db := .Values.database -}}
{{- if $db.existingSecret -}}
external
{{- else if not $db.url -}}
sqlite
{{- else if hasPrefix "postgresql" $db.url -}}
postgresql
{{- else if hasPrefix "sqlite" $db.url -}}
sqlite
{{- else -}}
{{- fail "database.url: nsstuck supports PostgreSQL (postgresql+psycopg://user:password@host:5432/db) and, for one replica, SQLite" -}}
{{- end -}}
{{- end -}}

{{- define "nsstuck.sqliteUrl" -}}
sqlite:////var/lib/nsstuck/nsstuck.db
{{- end -}}

{{- define "nsstuck.kubeconfigDir" -}}
/etc/nsstuck/kubeconfigs
{{- end -}}

{{/* Where the config file is mounted, and its path (NSSTUCK_CONFIG). */}}
{{- define "nsstuck.configDir" -}}
/etc/nsstuck/config
{{- end -}}

{{/*
Refusals: what the chart will not install, said in one line each. Included by the Deployment, so
that `helm template` and `helm install` both stop on them.
*/}}
{{- define "nsstuck.validate" -}}
{{- $engine := include "nsstuck.databaseEngine" . -}}
{{- if and (eq $engine "sqlite") (gt (int .Values.replicaCount) 1) -}}
{{- fail (printf "replicaCount is %d but the database is SQLite, which one replica only may use: set database.url or database.existingSecret to a PostgreSQL database" (int .Values.replicaCount)) -}}
{{- end -}}
{{- if and .Values.database.url .Values.database.existingSecret -}}
{{- fail "database: set either url or existingSecret, not both" -}}
{{- end -}}
{{- $db := .Values.database -}}
{{- if and $db.migrationUrl $db.migrationExistingSecret -}}
{{- fail "database: set either migrationUrl or migrationExistingSecret, not both" -}}
{{- end -}}
{{- if and (or $db.migrationUrl $db.migrationExistingSecret) (eq $engine "sqlite") -}}
{{- fail "database.migrationUrl and database.migrationExistingSecret are for PostgreSQL (a migration role beside the runtime role): SQLite has no roles, leave them empty" -}}
{{- end -}}
{{- if and $db.migrationUrl (not (hasPrefix "postgresql" $db.migrationUrl)) -}}
{{- fail "database.migrationUrl: a PostgreSQL URL (postgresql+psycopg://owner:password@host:5432/db), of the role that owns the schema" -}}
{{- end -}}
{{- if and $db.runtimeRole (not (or $db.migrationUrl $db.migrationExistingSecret)) -}}
{{- fail "database.runtimeRole goes with database.migrationUrl or database.migrationExistingSecret: with one role there is no other to grant to" -}}
{{- end -}}
{{- if and $db.runtimeRole (not (regexMatch "^[A-Za-z_][A-Za-z0-9_.@$-]{0,62}$" $db.runtimeRole)) -}}
{{- fail (printf "database.runtimeRole %q is not a role name (letters, digits, _ . @ $ -, at most 63)" $db.runtimeRole) -}}
{{- end -}}
{{- $names := list -}}
{{- range .Values.kubeconfigs -}}
{{- if not .name -}}
{{- fail "kubeconfigs: every entry needs a name (it becomes the directory /etc/nsstuck/kubeconfigs/<name>)" -}}
{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$" .name) -}}
{{- fail (printf "kubeconfigs: name %q must be lower-case letters, digits and '-' (at most 40)" .name) -}}
{{- end -}}
{{- if has .name $names -}}
{{- fail (printf "kubeconfigs: name %q is listed twice" .name) -}}
{{- end -}}
{{- if eq (empty .existingSecret) (empty .content) -}}
{{- fail (printf "kubeconfigs: %q needs either existingSecret or content" .name) -}}
{{- end -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- $dir := printf "%s/" (include "nsstuck.kubeconfigDir" .) -}}
{{- range $i, $cluster := .Values.config.clusters -}}
{{- $path := toString (default "" $cluster.kubeconfig) -}}
{{- if hasPrefix $dir $path -}}
{{- $name := index (splitList "/" (trimPrefix $dir $path)) 0 -}}
{{- if not (has $name $names) -}}
{{- fail (printf "config.clusters[%d].kubeconfig %s: no kubeconfigs entry is named %q" $i $path $name) -}}
{{- end -}}
{{- end -}}
{{- if and $cluster.in_cluster $cluster.act_as_approver (not ($.Values.remediation.actAsApprover | default dict).enabled) -}}
{{- fail (printf "config.clusters[%d] (%s) is in_cluster with act_as_approver: true, but remediation.actAsApprover.enabled is false: the chart grants no impersonation; enable both or neither" $i $cluster.name) -}}
{{- end -}}
{{- if and $cluster.in_cluster (not $.Values.remediation.enabled) (eq (toString $cluster.remediation) "true") -}}
{{- fail (printf "config.clusters[%d] (%s) is in_cluster with remediation: true, but remediation.enabled is false: the chart grants no write permission; enable both or neither" $i $cluster.name) -}}
{{- end -}}
{{- end -}}
{{- range (.Values.remediation.finalizerResources | default list) -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" (toString .)) -}}
{{- fail (printf "remediation.finalizerResources: %q is not RESOURCE or RESOURCE.GROUP (e.g. widgets.example.com); never * or a subresource: RBAC's * also grants subresources such as pods/ephemeralcontainers" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- $act := .Values.remediation.actAsApprover | default dict -}}
{{- if $act.enabled -}}
{{- if not .Values.remediation.enabled -}}
{{- fail "remediation.actAsApprover.enabled needs remediation.enabled: true" -}}
{{- end -}}
{{- if not $act.users -}}
{{- fail "remediation.actAsApprover.users is empty: list the Kubernetes users nsstuck may act as (an empty list would be any user)" -}}
{{- end -}}
{{- range (concat $act.users (default (list) $act.groups)) -}}
{{- if or (not .) (hasPrefix "system:" (toString .)) -}}
{{- fail (printf "remediation.actAsApprover: %q: nsstuck never acts as an empty or system: user or group" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The config file. A cluster nsstuck runs in gets `remediation: false` unless the chart grants the
remediation ClusterRole (remediation.enabled), so that it offers no button it could not carry out.
With admission.enabled, the webhook's cluster gets admission.mode, budget_seconds and channel from the
chart's admission values.
*/}}
{{- define "nsstuck.configFile" -}}
{{- $config := deepCopy .Values.config -}}
{{- $clusters := list -}}
{{- range $config.clusters -}}
{{- $cluster := . -}}
{{- if and .in_cluster (not $.Values.remediation.enabled) -}}
{{- $cluster = set $cluster "remediation" false -}}
{{- end -}}
{{- if and .in_cluster $.Values.remediation.finalizerResources -}}
{{- $cluster = set $cluster "finalizer_resources" (concat (.finalizer_resources | default list) $.Values.remediation.finalizerResources | uniq) -}}
{{- end -}}
{{- if and $.Values.admission.enabled (eq (toString .name) (include "nsstuck.admissionCluster" $)) -}}
{{- $a := deepCopy (.admission | default dict) -}}
{{- $_ := set $a "mode" $.Values.admission.mode -}}
{{- $_ := set $a "budget_seconds" (int $.Values.admission.budgetSeconds) -}}
{{- with $.Values.admission.channel }}{{ $_ := set $a "channel" . }}{{ end -}}
{{- $cluster = set $cluster "admission" $a -}}
{{- end -}}
{{- $clusters = append $clusters $cluster -}}
{{- end -}}
{{- $_ := set $config "clusters" $clusters -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
The finalizer rules of remediation: `get` and `patch` on the resources the finalizer catalogue's
finalizers sit on (files/finalizer-resources.yaml, generated from the catalogue) and on those
remediation.finalizerResources adds, grouped by API group. Never `*`, never a subresource.
*/}}
{{- define "nsstuck.finalizerResources" -}}
{{- $catalogue := (.Files.Get "files/finalizer-resources.yaml" | fromYaml).resources -}}
{{- concat $catalogue (.Values.remediation.finalizerResources | default list) | uniq | toJson -}}
{{- end -}}

{{- define "nsstuck.finalizerRules" -}}
{{- $groups := dict -}}
{{- range (include "nsstuck.finalizerResources" . | fromJsonArray) -}}
{{- $parts := splitn "." 2 (toString .) -}}
{{- $group := default "" $parts._1 -}}
{{- $_ := set $groups $group (append (default (list) (get $groups $group)) $parts._0 | uniq | sortAlpha) -}}
{{- end -}}
{{- range $group := keys $groups | sortAlpha }}
- apiGroups: [{{ $group | quote }}]
  resources: [{{ range $i, $r := get $groups $group }}{{ if $i }}, {{ end }}{{ $r | quote }}{{ end }}]
  verbs: [get, patch]
{{- end -}}
{{- end -}}

{{/*
The namespace-delete admission webhook (admission.enabled; docs/admission.md, "Installing with the
chart"). Its reviews are answered as one registered cluster: admission.cluster, or else the one
config.clusters entry with in_cluster: true (the webhook configuration goes into the cluster the release
is installed in, and that is the cluster nsstuck runs in).
*/}}
{{- define "nsstuck.admissionCluster" -}}
{{- $a := .Values.admission -}}
{{- $names := list -}}
{{- $inCluster := list -}}
{{- range .Values.config.clusters -}}
{{- $names = append $names (toString .name) -}}
{{- if .in_cluster }}{{ $inCluster = append $inCluster (toString .name) }}{{ end -}}
{{- end -}}
{{- if $a.cluster -}}
{{- if not (has $a.cluster $names) -}}
{{- fail (printf "admission.cluster %q: no config.clusters entry has that name (registered: %s)" $a.cluster (join ", " $names)) -}}
{{- end -}}
{{- $a.cluster -}}
{{- else if eq (len $inCluster) 1 -}}
{{- index $inCluster 0 -}}
{{- else -}}
{{- fail (printf "admission.enabled: set admission.cluster to the config.clusters entry of the cluster this chart is installed in (%d entries have in_cluster: true)" (len $inCluster)) -}}
{{- end -}}
{{- end -}}

{{- define "nsstuck.admissionServiceName" -}}
{{- printf "%s-admission" (include "nsstuck.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret with tls.crt, tls.key and ca.crt: cert-manager's, or the chart's own. */}}
{{- define "nsstuck.admissionSecretName" -}}
{{- if .Values.admission.certManager -}}
{{- printf "%s-admission-cert" (include "nsstuck.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-admission-tls" (include "nsstuck.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The Service's DNS names: the serving certificate's SANs (the API server calls NAME.NAMESPACE.svc). */}}
{{- define "nsstuck.admissionDNSNames" -}}
{{- $svc := include "nsstuck.admissionServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson -}}
{{- end -}}

{{/* The namespaces the webhook is never called for: the system ones, the release's own, and admission.excludeNamespaces. */}}
{{- define "nsstuck.admissionExcluded" -}}
{{- concat (list "kube-system" "kube-public" "kube-node-lease" .Release.Namespace) (.Values.admission.excludeNamespaces | default list) | uniq | toJson -}}
{{- end -}}

{{/*
The admission checks of the values, included by the Deployment with the other refusals: mode and
budget are the chart's values (the webhook's timeoutSeconds is computed from the budget), not the
config's.
*/}}
{{- define "nsstuck.validateAdmission" -}}
{{- if .Values.admission.enabled -}}
{{- $name := include "nsstuck.admissionCluster" . -}}
{{- range .Values.config.clusters -}}
{{- if and (eq (toString .name) $name) .admission -}}
{{- if or (hasKey .admission "mode") (hasKey .admission "budget_seconds") -}}
{{- fail (printf "config.clusters (%s): with admission.enabled, set admission.mode and admission.budgetSeconds of the chart, not the cluster's admission.mode or admission.budget_seconds (the webhook's timeoutSeconds is the budget + 2)" $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if has (int .Values.admission.port) (list 3000 9090) -}}
{{- fail (printf "admission.port %d: the webhook needs a port of its own (3000 and 9090 are nsstuck's HTTP and metrics ports)" (int .Values.admission.port)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
