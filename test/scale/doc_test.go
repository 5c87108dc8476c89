// Package scale_test measures the faultline controller at fleet scale, as a black
// box: the real controller binary against the real apiserver with kwok simulating GPU
// nodes (leases and status heartbeats at the kubelet's rates) and Loki receiving a
// background of benign kernel lines from every node plus candidate lines (lines that
// pass the controller's LogQL filter and reach the matcher). TestScale prints one
// SCALE line per run so that runs can be compared; it asserts correctness (every
// burst node decided, the budget never exceeded), never time.
package scale_test
