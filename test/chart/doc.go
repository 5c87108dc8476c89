// Package chart holds the tests of the Helm chart (helm/faultline), the rendered
// manifests (manifests/) and the container images (Dockerfile,
// Dockerfile.probe-agent). They run the pinned helm and kubectl of test/tools, apply
// every rendered object to a real kube-apiserver, check the collector configuration
// with a real collector and Loki and the alerting rules with promtool, and check the
// Dockerfiles against the Makefiles, git and the faultline binary (no container
// engine is needed).
package chart
