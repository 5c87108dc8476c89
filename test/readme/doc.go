// Package readme holds the tests that keep README.md and docs/ equal to what the code
// alone decides: the metrics they name are registered, their links resolve. The
// figures of other packages are checked beside them (rules/packs: rule and corpus
// counts; cmd/faultline and cmd/faultline-probe-agent: command lines and ports;
// test/demo: the demo's nodes).
package readme
