package nodeauth

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config of the faultlineauth extension.
type Config struct {
	// Kubeconfig is the kubeconfig the TokenReviews are made with; empty: the
	// collector's in-cluster ServiceAccount.
	Kubeconfig string `mapstructure:"kubeconfig"`
	// Audiences the exporter's token must be issued for (the projected token's
	// audience, e.g. faultline-collector). A token for the apiserver's default
	// audience is refused, so a pod's ordinary token is never enough.
	Audiences []string `mapstructure:"audiences"`
	// ServiceAccounts that may send, as namespace/name (the exporter DaemonSet's).
	ServiceAccounts []string `mapstructure:"service_accounts"`
	// CacheTTL is how long an accepted token is trusted without a new TokenReview.
	CacheTTL time.Duration `mapstructure:"cache_ttl"`
	// StaleTTL is how much longer an accepted token stays accepted while the
	// apiserver cannot be reached for a new review: a brief apiserver outage must not
	// turn every exporter's batch into a 401 (which an exporter does not retry).
	StaleTTL time.Duration `mapstructure:"stale_ttl"`
	// NegativeCacheTTL is how long a refused token is refused without a new review.
	NegativeCacheTTL time.Duration `mapstructure:"negative_cache_ttl"`
	// CacheSize bounds the cached reviews (least recently used go first).
	CacheSize int `mapstructure:"cache_size"`
	// ReviewTimeout bounds one TokenReview.
	ReviewTimeout time.Duration `mapstructure:"review_timeout"`
}

func createDefaultConfig() *Config {
	return &Config{
		CacheTTL:         time.Minute,
		StaleTTL:         10 * time.Minute,
		NegativeCacheTTL: 10 * time.Second,
		CacheSize:        4096,
		ReviewTimeout:    5 * time.Second,
	}
}

// Validate checks the configuration when the collector loads it.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Audiences) == 0 {
		errs = append(errs, errors.New("audiences: at least one is required (the exporters' token audience)"))
	}
	for _, a := range c.Audiences {
		if strings.TrimSpace(a) == "" {
			errs = append(errs, errors.New("audiences: empty audience"))
		}
	}
	if len(c.ServiceAccounts) == 0 {
		errs = append(errs, errors.New("service_accounts: at least one namespace/name is required"))
	}
	for _, sa := range c.ServiceAccounts {
		if ns, name, ok := strings.Cut(sa, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("service_accounts: %q is not namespace/name", sa))
		}
	}
	if c.CacheTTL < 0 || c.StaleTTL < 0 || c.NegativeCacheTTL < 0 {
		errs = append(errs, errors.New("cache_ttl, stale_ttl and negative_cache_ttl must not be negative"))
	}
	if c.CacheSize < 1 {
		errs = append(errs, errors.New("cache_size must be at least 1"))
	}
	if c.ReviewTimeout <= 0 {
		errs = append(errs, errors.New("review_timeout must be positive"))
	}
	return errors.Join(errs...)
}

// usernames returns the TokenReview usernames of the allowed ServiceAccounts.
func (c *Config) usernames() map[string]bool {
	m := make(map[string]bool, len(c.ServiceAccounts))
	for _, sa := range c.ServiceAccounts {
		ns, name, _ := strings.Cut(sa, "/")
		m["system:serviceaccount:"+ns+":"+name] = true
	}
	return m
}
