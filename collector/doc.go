// Package collector holds faultline's OpenTelemetry Collector components. It is a
// module of its own so that the collector's dependencies stay out of faultline's.
//
//   - nodeauth: a server authenticator (extension "faultlineauth") that accepts only
//     dmesg-exporters presenting a ServiceAccount token with the collector's audience,
//     and learns the node the token was issued on from the apiserver's TokenReview.
//   - nodeattr: a logs processor ("faultlinenode") that writes that node into every
//     record's node attributes, so the node a line is attributed to comes from the
//     sender's identity and never from a label the sender wrote.
//   - tokenfile: a client authenticator (extension "faultlinetoken") that sends the
//     collector's projected ServiceAccount token to the controller's intake, read
//     again every minute so the kubelet's renewals are followed.
//
// The test collector (test/tools/otelcol-builder.yaml) and the collector image
// (Dockerfile.collector) are built with all three.
package collector
