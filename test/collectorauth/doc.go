// Package collectorauth tests that nobody forges fault lines: the collector's
// receiver, with faultline's authenticator and node processor, against a real
// kube-apiserver (TokenReview), the real collector build and a real Loki.
package collectorauth
