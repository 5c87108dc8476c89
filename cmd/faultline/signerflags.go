package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/agentcerts"
)

// signerFlags turn on the approver and signer of the probe agents' per-node
// certificates (controller/agentcerts).
type signerFlags struct {
	certFile, keyFile string
	serviceAccount    string
	lifetime          time.Duration
}

func (s *signerFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.certFile, "probe-agent-signer-cert-file", "", "CA certificate that signs the probe agents' per-node certificates (CSR signer faultline.io/probe-agent); with --probe-agent-signer-key-file, the controller approves and signs the agents' requests")
	f.StringVar(&s.keyFile, "probe-agent-signer-key-file", "", "key of --probe-agent-signer-cert-file")
	f.StringVar(&s.serviceAccount, "probe-agent-service-account", "", "the agents' ServiceAccount, the only requester whose certificate requests are approved (in --probe-agent-namespace)")
	f.DurationVar(&s.lifetime, "probe-agent-cert-lifetime", agentcerts.DefaultLifetime, "how long an agent's certificate is valid (the agent renews it at 70 to 90% of that)")
}

// start runs the signer until ctx ends, when its files are given.
func (s *signerFlags) start(ctx context.Context, client kubernetes.Interface, agentNS string, log *slog.Logger) error {
	if s.certFile == "" && s.keyFile == "" {
		return nil
	}
	if s.certFile == "" || s.keyFile == "" || s.serviceAccount == "" {
		return errors.New("--probe-agent-signer-cert-file, --probe-agent-signer-key-file and --probe-agent-service-account go together")
	}
	if s.lifetime < time.Hour {
		return fmt.Errorf("--probe-agent-cert-lifetime %s: want at least 1h", s.lifetime)
	}
	ca, err := agentcerts.LoadCA(s.certFile, s.keyFile)
	if err != nil {
		return err
	}
	signer, err := agentcerts.New(agentcerts.Config{Client: client, AgentNamespace: agentNS, AgentServiceAccount: s.serviceAccount,
		CA: ca, Lifetime: s.lifetime, Log: log.With("component", "agentcerts")})
	if err != nil {
		return err
	}
	go func() {
		if err := signer.Run(ctx); err != nil {
			log.Error("probe agents' certificate signer stopped", "err", err)
		}
	}()
	return nil
}
