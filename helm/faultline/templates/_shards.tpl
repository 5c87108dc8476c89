{{/*
The controller's shards (controller.shards, docs/scale.md) as a JSON list, one
entry per controller Deployment: [{}] when the fleet is not sharded, else each
shard with its name, value, budgetMax, streamMatcher, and on the default shard
(default: true, or the first) "except": the other shards' values, so that it also
takes the nodes no other shard names (unlabelled ones included).
*/}}
{{- define "faultline.controllerShards" -}}
{{- $c := .Values.controller -}}
{{- if not $c.shards -}}
[{}]
{{- else -}}
{{- if lt (len $c.shards) 2 -}}
{{- fail "controller.shards: list at least two shards (one controller needs none)" -}}
{{- end -}}
{{- if not $c.shardLabel -}}
{{- fail "controller.shards needs controller.shardLabel" -}}
{{- end -}}
{{- $default := "" -}}
{{- $names := dict -}}
{{- $values := dict -}}
{{- range $c.shards -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (toString .name)) -}}
{{- fail (printf "controller.shards: name %q must be a DNS label (it names the Deployment, Lease and checkpoint)" (toString .name)) -}}
{{- end -}}
{{- if not .value -}}
{{- fail (printf "controller.shards: shard %s has no value (of controller.shardLabel)" .name) -}}
{{- end -}}
{{- if or (hasKey $names .name) (hasKey $values (toString .value)) -}}
{{- fail (printf "controller.shards: shard %s: names and values must be unique" .name) -}}
{{- end -}}
{{- $_ := set $names .name true -}}
{{- $_ := set $values (toString .value) true -}}
{{- if .default -}}
{{- if $default -}}
{{- fail "controller.shards: only one shard may be the default" -}}
{{- end -}}
{{- $default = .name -}}
{{- end -}}
{{- end -}}
{{- $default = $default | default (first $c.shards).name -}}
{{- $out := list -}}
{{- range $c.shards -}}
{{- $s := dict "name" .name "value" (toString .value) "budgetMax" (.budgetMax | default 0) "streamMatcher" (.streamMatcher | default "") -}}
{{- if eq .name $default -}}
{{- $except := list -}}
{{- range $c.shards -}}
{{- if ne .name $default -}}
{{- $except = append $except (toString .value) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $s "except" $except -}}
{{- end -}}
{{- $out = append $out $s -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
{{- end -}}
