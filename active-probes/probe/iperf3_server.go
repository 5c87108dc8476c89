package probe

import "time"

// The iperf3-server check starts a one-shot iperf3 server and answers as soon as it
// listens; the server outlives the run, serves one test and exits, or ends at its idle
// timeout. It is a check like the others so that an agent runs it through the same
// API, authorization and runner, and lists it among its checks.
func init() {
	Register(Spec{
		Name:           Iperf3ServerCheck,
		Help:           "start a one-shot iperf3 server for a peer's iperf3 check (answers once it listens)",
		DefaultTimeout: 30 * time.Second,
		Params: Schema{
			{Name: "port", Type: TypePort, Target: TargetPort, Default: "5201", Help: "port to listen on (an allowed port)"},
			{Name: "bind", Type: TypeIP, Help: "address to listen on (default: all)"},
			{Name: "idle_timeout", Type: TypeDuration, Default: "60s", Min: 1, Max: 600, Help: "end the server if no client came within this time"},
		},
	})
}

// Iperf3ServerCheck is the check a peer runs before an iperf3 client measures against
// it (Spec.PeerServer names it).
const Iperf3ServerCheck = "iperf3-server"
