package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/controller/agentcerts"
)

// signerFlags turn on the approver and signer of the probe agents' per-node
// certificates (controller/agentcerts), or the approver alone where an external
// signer (cert-manager) signs them.
type signerFlags struct {
	certFile, keyFile string
	signerName        string
	serviceAccount    string
	lifetime          time.Duration
}

func (s *signerFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.certFile, "probe-agent-signer-cert-file", "", "CA certificate that signs the probe agents' per-node certificates (CSR signer "+agentapi.SignerName+"); with --probe-agent-signer-key-file, the controller approves and signs the agents' requests")
	f.StringVar(&s.keyFile, "probe-agent-signer-key-file", "", "key of --probe-agent-signer-cert-file")
	f.StringVar(&s.signerName, "probe-agent-cert-signer", agentapi.SignerName, "the CSR signer of the agents' certificates (their --node-cert-signer); another than "+agentapi.SignerName+" is an external signer (cert-manager's issuers.cert-manager.io/NAMESPACE.ISSUER or clusterissuers.cert-manager.io/ISSUER): the controller approves and denies its agents' requests with the same checks and signs nothing (no --probe-agent-signer-cert-file)")
	f.StringVar(&s.serviceAccount, "probe-agent-service-account", "", "the agents' ServiceAccount, the only requester whose certificate requests are approved (in --probe-agent-namespace)")
	f.DurationVar(&s.lifetime, "probe-agent-cert-lifetime", agentcerts.DefaultLifetime, "how long an agent's certificate is valid, with the controller as signer (the agent renews it at 70 to 90% of that)")
}

// start runs the signer, or the approver for an external signer, until ctx ends,
// when its flags are given.
func (s *signerFlags) start(ctx context.Context, client kubernetes.Interface, agentNS string, log *slog.Logger) error {
	external := s.signerName != agentapi.SignerName
	if s.certFile == "" && s.keyFile == "" && !external {
		return nil
	}
	cfg := agentcerts.Config{Client: client, SignerName: s.signerName, AgentNamespace: agentNS, AgentServiceAccount: s.serviceAccount,
		Lifetime: s.lifetime, Log: log.With("component", "agentcerts")}
	switch {
	case external && (s.certFile != "" || s.keyFile != ""):
		return fmt.Errorf("--probe-agent-cert-signer %s is an external signer: the controller only approves, give no --probe-agent-signer-cert-file or --probe-agent-signer-key-file", s.signerName)
	case external && s.serviceAccount == "":
		return errors.New("--probe-agent-cert-signer needs --probe-agent-service-account")
	case external:
		cfg.Lifetime = 0
	case s.certFile == "" || s.keyFile == "" || s.serviceAccount == "":
		return errors.New("--probe-agent-signer-cert-file, --probe-agent-signer-key-file and --probe-agent-service-account go together")
	case s.lifetime < time.Hour:
		return fmt.Errorf("--probe-agent-cert-lifetime %s: want at least 1h", s.lifetime)
	default:
		ca, err := agentcerts.LoadCA(s.certFile, s.keyFile)
		if err != nil {
			return err
		}
		cfg.CA = ca
	}
	signer, err := agentcerts.New(cfg)
	if err != nil {
		return err
	}
	go func() {
		if err := signer.Run(ctx); err != nil {
			log.Error("probe agents' certificate signer stopped", "err", err)
		}
	}()
	if external {
		log.Info("approving the probe agents' certificate requests for an external signer", "signer", s.signerName)
	}
	return nil
}
