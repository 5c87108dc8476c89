package agent

import "time"

// SetCertReload changes how often ServerTLS reads its files again, for the test's
// duration.
func SetCertReload(t interface{ Cleanup(func()) }, d time.Duration) {
	old := certReload
	certReload = d
	t.Cleanup(func() { certReload = old })
}
