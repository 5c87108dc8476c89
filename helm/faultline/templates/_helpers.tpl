{{/* Chart name. */}}
{{- define "faultline.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the release name when it contains the chart name, else <release>-<chart>. */}}
{{- define "faultline.fullname" -}}
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

{{/* Labels on every object; call with (dict "ctx" $ "component" "controller"). */}}
{{- define "faultline.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "faultline.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: faultline
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels; call with (dict "ctx" $ "component" "controller"). */}}
{{- define "faultline.selectorLabels" -}}
app.kubernetes.io/name: {{ include "faultline.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/* The faultline image (controller, exporter). */}}
{{- define "faultline.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The probe-agent image. */}}
{{- define "faultline.probeAgentImage" -}}
{{- printf "%s:%s" .Values.probeAgent.image.repository (default .Chart.AppVersion .Values.probeAgent.image.tag) -}}
{{- end -}}

{{/* ServiceAccount names. */}}
{{- define "faultline.controllerServiceAccount" -}}
{{- if .Values.controller.serviceAccount.create -}}
{{- default (printf "%s-controller" (include "faultline.fullname" .)) .Values.controller.serviceAccount.name -}}
{{- else -}}
{{- required "controller.serviceAccount.name is required when controller.serviceAccount.create is false" .Values.controller.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "faultline.exporterServiceAccount" -}}
{{- if .Values.exporter.serviceAccount.create -}}
{{- default (printf "%s-dmesg-exporter" (include "faultline.fullname" .)) .Values.exporter.serviceAccount.name -}}
{{- else -}}
{{- required "exporter.serviceAccount.name is required when exporter.serviceAccount.create is false" .Values.exporter.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "faultline.probeAgentServiceAccount" -}}
{{- if .Values.probeAgent.serviceAccount.create -}}
{{- default (printf "%s-probe-agent" (include "faultline.fullname" .)) .Values.probeAgent.serviceAccount.name -}}
{{- else -}}
{{- required "probeAgent.serviceAccount.name is required when probeAgent.serviceAccount.create is false" .Values.probeAgent.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret with the probe agents' certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "faultline.probeAgentTLSSecret" -}}
{{- default (printf "%s-probe-agent-tls" (include "faultline.fullname" .)) .Values.probeAgent.tls.existingSecret -}}
{{- end -}}

{{/* The probe agents' TLS mode: node (per-node certificates from the CSR API) or shared. */}}
{{- define "faultline.probeAgentNodeCerts" -}}
{{- $m := .Values.probeAgent.tls.mode -}}
{{- if not (has $m (list "node" "shared")) -}}
{{- fail (printf "probeAgent.tls.mode %q: want node or shared" $m) -}}
{{- end -}}
{{- if eq $m "node" }}true{{ end -}}
{{- end -}}

{{/* The Secret of the CA that signs the agents' per-node certificates (mode node). */}}
{{- define "faultline.probeAgentSignerSecret" -}}
{{- default (printf "%s-probe-agent-signer" (include "faultline.fullname" .)) .Values.probeAgent.tls.signer.existingSecret -}}
{{- end -}}

{{/*
"true" when cert-manager signs the agents' per-node certificates
(probeAgent.tls.certManager.issuer.name): the controller only approves. Fails the
render on values that do not fit.
*/}}
{{- define "faultline.probeAgentCertManager" -}}
{{- $cm := .Values.probeAgent.tls.certManager -}}
{{- if $cm.issuer.name -}}
{{- if not (include "faultline.probeAgentNodeCerts" .) -}}
{{- fail "probeAgent.tls.certManager.issuer signs per-node certificates: it needs probeAgent.tls.mode node" -}}
{{- end -}}
{{- if not (has $cm.issuer.kind (list "Issuer" "ClusterIssuer")) -}}
{{- fail (printf "probeAgent.tls.certManager.issuer.kind %q: want Issuer or ClusterIssuer" $cm.issuer.kind) -}}
{{- end -}}
{{- if eq (len (compact (list $cm.caBundle.secret $cm.caBundle.configMap))) 1 | not -}}
{{- fail "probeAgent.tls.certManager.issuer needs the issuer's CA certificate for the controller: set one of probeAgent.tls.certManager.caBundle.secret or .configMap (in the release namespace; key caBundle.key, default ca.crt)" -}}
{{- end -}}
{{- if .Values.probeAgent.tls.signer.existingSecret -}}
{{- fail "probeAgent.tls.signer.existingSecret is the controller's own signer CA: not with probeAgent.tls.certManager.issuer, whose issuer signs" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/*
The CSR signer name of the agents' certificates: faultline.io/probe-agent (the
controller signs), or the cert-manager issuer's.
*/}}
{{- define "faultline.probeAgentSignerName" -}}
{{- $i := .Values.probeAgent.tls.certManager.issuer -}}
{{- if not (include "faultline.probeAgentCertManager" .) -}}
faultline.io/probe-agent
{{- else if eq $i.kind "ClusterIssuer" -}}
{{- printf "clusterissuers.cert-manager.io/%s" $i.name -}}
{{- else -}}
{{- printf "issuers.cert-manager.io/%s.%s" (default .Release.Namespace $i.namespace) $i.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret whose ca.crt the controller verifies the agents with. */}}
{{- define "faultline.probeAgentCASecret" -}}
{{- if include "faultline.probeAgentNodeCerts" . -}}
{{- include "faultline.probeAgentSignerSecret" . -}}
{{- else -}}
{{- include "faultline.probeAgentTLSSecret" . -}}
{{- end -}}
{{- end -}}

{{/*
The data of the generated signer CA Secret (toJson): tls.crt and ca.crt the CA's
certificate, tls.key its key, or what the cluster's Secret already holds.
*/}}
{{- define "faultline.signerCAData" -}}
{{- $old := lookup "v1" "Secret" .ctx.Release.Namespace .secret -}}
{{- $oldData := ($old | default dict).data | default dict -}}
{{- if and (index $oldData "ca.crt") (index $oldData "tls.crt") (index $oldData "tls.key") -}}
{{- pick $oldData "ca.crt" "tls.crt" "tls.key" | toJson -}}
{{- else -}}
{{- $ca := genCA (printf "%s-probe-agent-signer" (include "faultline.fullname" .ctx)) (int .days) -}}
{{- dict "ca.crt" ($ca.Cert | b64enc) "tls.crt" ($ca.Cert | b64enc) "tls.key" ($ca.Key | b64enc) | toJson -}}
{{- end -}}
{{- end -}}

{{/* Whether the controller serves Autopilot's /status ("" when not): controller.status.enabled, or when unset autopilotCompat.enabled. */}}
{{- define "faultline.controllerStatus" -}}
{{- $s := .Values.controller.status.enabled -}}
{{- if (kindIs "bool" $s) | ternary $s .Values.controller.autopilotCompat.enabled -}}
true
{{- end -}}
{{- end -}}

{{/* The Secret with the certificate of the controller's /status listener (tls.crt, tls.key, ca.crt). */}}
{{- define "faultline.controllerStatusTLSSecret" -}}
{{- default (printf "%s-controller-status-tls" (include "faultline.fullname" .)) .Values.controller.status.tls.existingSecret -}}
{{- end -}}

{{/* Whether the collector pushes lines to the controller's intake ("" when not). */}}
{{- define "faultline.controllerIntake" -}}
{{- if and .Values.controller.enabled .Values.collector.enabled .Values.controller.intake.enabled -}}
true
{{- end -}}
{{- end -}}

{{/* The intake's Service and EndpointSlice of one controller shard; call with
(dict "ctx" $ "shard" <an entry of faultline.controllerShards>). */}}
{{- define "faultline.controllerIntakeName" -}}
{{- printf "%s-controller%s-intake" (include "faultline.fullname" .ctx) (ternary (printf "-%s" .shard.name) "" (not (empty .shard.name))) -}}
{{- end -}}

{{/* The Secret with the certificate of the controller's intake (tls.crt, tls.key, ca.crt). */}}
{{- define "faultline.controllerIntakeTLSSecret" -}}
{{- default (printf "%s-controller-intake-tls" (include "faultline.fullname" .)) .Values.controller.intake.tls.existingSecret -}}
{{- end -}}

{{/* The name on the probe agents' shared certificate: their Service's DNS name. */}}
{{- define "faultline.probeAgentServerName" -}}
{{- printf "%s-probe-agent.%s.svc" (include "faultline.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/*
The data of a generated serving certificate Secret (toJson; read it back with fromJson):
a CA and a certificate for the Service <short>.<namespace>.svc (and its shorter and
longer names; and those of the Services in "also", if given), or what the cluster's
Secret already holds, so an upgrade keeps both.
Call with (dict "ctx" $ "secret" <Secret name> "short" <Service name> "days" <validity>).
*/}}
{{- define "faultline.servingCertData" -}}
{{- $ns := .ctx.Release.Namespace -}}
{{- $old := lookup "v1" "Secret" $ns .secret -}}
{{- $oldData := ($old | default dict).data | default dict -}}
{{- if and (index $oldData "ca.crt") (index $oldData "tls.crt") (index $oldData "tls.key") -}}
{{- pick $oldData "ca.crt" "tls.crt" "tls.key" | toJson -}}
{{- else -}}
{{- $days := int .days -}}
{{- $name := printf "%s.%s.svc" .short $ns -}}
{{- $ca := genCA (printf "%s-ca" .short) $days -}}
{{- $names := list -}}
{{- range prepend (.also | default list) .short -}}
{{- $names = concat $names (list (printf "%s.%s.svc" . $ns) . (printf "%s.%s" . $ns) (printf "%s.%s.svc.cluster.local" . $ns)) -}}
{{- end -}}
{{- $crt := genSignedCert $name nil $names $days $ca -}}
{{- dict "ca.crt" ($ca.Cert | b64enc) "tls.crt" ($crt.Cert | b64enc) "tls.key" ($crt.Key | b64enc) | toJson -}}
{{- end -}}
{{- end -}}

{{/* The Secret with the collector receiver's certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "faultline.collectorTLSSecret" -}}
{{- default (printf "%s-tls" (include "faultline.collectorName" .)) .Values.collector.tls.existingSecret -}}
{{- end -}}

{{/* Whether the chart's senders post to the chart's collector over TLS ("" when not). */}}
{{- define "faultline.collectorTLS" -}}
{{- if and .Values.collector.enabled .Values.collector.tls.enabled (not .Values.exporter.otlpEndpoint) -}}
true
{{- end -}}
{{- end -}}

{{/* Loki base URL without a trailing slash. */}}
{{- define "faultline.lokiURL" -}}
{{- required "loki.url is required" .Values.loki.url | trimSuffix "/" -}}
{{- end -}}

{{/* The Secret and key holding Loki's basic-auth password ("" when none). */}}
{{- define "faultline.lokiPasswordSecret" -}}
{{- if .Values.loki.basicAuth.existingSecret -}}
{{- .Values.loki.basicAuth.existingSecret -}}
{{- else if .Values.loki.basicAuth.password -}}
{{- printf "%s-loki" (include "faultline.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "faultline.lokiPasswordKey" -}}
{{- if .Values.loki.basicAuth.existingSecret -}}
{{- .Values.loki.basicAuth.existingSecretKey -}}
{{- else -}}
password
{{- end -}}
{{- end -}}

{{/* The key of the collector's Loki Authorization header value in the password Secret. */}}
{{- define "faultline.lokiAuthorizationKey" -}}
{{- if .Values.loki.basicAuth.existingSecret -}}
{{- .Values.loki.basicAuth.existingSecretAuthorizationKey -}}
{{- else -}}
authorization
{{- end -}}
{{- end -}}

{{/* The collector's image. */}}
{{- define "faultline.collectorImage" -}}
{{- printf "%s:%s" .Values.collector.image.repository (default .Chart.AppVersion .Values.collector.image.tag) -}}
{{- end -}}

{{/* The collector's ServiceAccount. */}}
{{- define "faultline.collectorServiceAccount" -}}
{{- if .Values.collector.serviceAccount.create -}}
{{- default (include "faultline.collectorName" .) .Values.collector.serviceAccount.name -}}
{{- else -}}
{{- required "collector.serviceAccount.name is required when collector.serviceAccount.create is false" .Values.collector.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Whether the exporters authenticate to the chart's collector with a projected token. */}}
{{- define "faultline.exporterAuth" -}}
{{- if and .Values.collector.enabled .Values.collector.exporterAuth.enabled (eq .Values.exporter.output "otlp") (not .Values.exporter.otlpEndpoint) -}}
true
{{- end -}}
{{- end -}}

{{/* The collector's Service name. */}}
{{- define "faultline.collectorName" -}}
{{- printf "%s-otel-collector" (include "faultline.fullname" .) -}}
{{- end -}}

{{/* Where the exporter sends OTLP. */}}
{{- define "faultline.otlpEndpoint" -}}
{{- if .Values.exporter.otlpEndpoint -}}
{{- .Values.exporter.otlpEndpoint | trimSuffix "/" -}}
{{- else if .Values.collector.enabled -}}
{{- printf "%s://%s.%s.svc:%d" (ternary "https" "http" .Values.collector.tls.enabled) (include "faultline.collectorName" .) .Release.Namespace (int .Values.collector.port) -}}
{{- else -}}
{{- fail "exporter.output=otlp needs collector.enabled=true or exporter.otlpEndpoint" -}}
{{- end -}}
{{- end -}}

{{/* The taint effects the controller may place, comma-separated: the admission
policy's and the controller's --allow-taint-effects, from one value so they agree.
NoSchedule is every rule's default effect, so it is always among them. */}}
{{- define "faultline.taintEffects" -}}
{{- $effects := .Values.controller.taintEffects -}}
{{- if not (has "NoSchedule" $effects) -}}
{{- fail (printf "controller.taintEffects must include NoSchedule, the default effect of every rule's taint (got %v)" $effects) -}}
{{- end -}}
{{- join "," $effects -}}
{{- end -}}

{{/* Key=value,... of a label map (for --probe-node-selector). */}}
{{- define "faultline.selectorString" -}}
{{- $pairs := list -}}
{{- range $k, $v := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* The name of the user packs ConfigMap ("" when there are none). */}}
{{- define "faultline.userPacksConfigMap" -}}
{{- if .Values.packs.existingConfigMap -}}
{{- .Values.packs.existingConfigMap -}}
{{- else if .Values.packs.user -}}
{{- printf "%s-packs" (include "faultline.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Pod security context shared by the non-root pods. */}}
{{- define "faultline.nonRootPodSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container security context of the non-root containers. */}}
{{- define "faultline.restrictedContainerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/*
The ConfigMap of one default pack: <fullname>-default-packs-<file name without .yaml>
(dict "fullname" ... "path" "packs/00-nvidia-xid.yaml").
*/}}
{{- define "faultline.defaultPackConfigMap" -}}
{{- printf "%s-default-packs-%s" .fullname (base .path | trimSuffix ".yaml") | lower | trunc 63 | trimSuffix "-" -}}
{{- end }}
