package probe

import "time"

// The iperf3 check measures TCP throughput from this node to a peer that runs an
// iperf3 server (the peer's iperf3-server check starts one): `iperf3 -c <peer> -p
// <port> -J -t <seconds>`. Invasive: it fills the link for the duration.
func init() {
	Register(Spec{
		Name:     Iperf3Check,
		Help:     "TCP throughput to a peer's iperf3 server (client side), against a minimum",
		Invasive: true,
		TimeoutFor: func(p Params) time.Duration {
			return time.Duration(p.Int("seconds"))*time.Second + 30*time.Second
		},
		Peer:       true,
		PeerServer: Iperf3ServerCheck,
		Params: Schema{
			{Name: "peer", Type: TypeHost, Target: TargetPeer, Required: true, Help: "IP address or hostname of the node running the iperf3 server (an agent node or an allowed peer)"},
			{Name: "port", Type: TypePort, Target: TargetPort, Default: "5201", Help: "server port (an allowed port)"},
			{Name: "seconds", Type: TypeInt, Default: "5", Min: 1, Max: 60, Help: "test duration"},
			{Name: "bind", Type: TypeIP, Help: "local address to send from (selects the NIC)"},
			{Name: "streams", Type: TypeInt, Default: "1", Min: 1, Max: 32, Help: "parallel TCP streams"},
			{Name: "reverse", Type: TypeBool, Default: "false", Help: "measure peer-to-this-node instead"},
			{Name: "min_gbps", Type: TypeFloat, Default: "10", Min: 0, Max: 100000, Help: "fail below this many Gbit/s received"},
		},
	})
}

// Iperf3Check is the iperf3 check's name.
const Iperf3Check = "iperf3"
