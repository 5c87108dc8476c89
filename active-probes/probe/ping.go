package probe

import "time"

// The ping check sends ICMP echo requests to a peer and judges packet loss and
// round-trip time. Light enough to be harmless, but it needs a peer, so it is not
// enabled by default.
func init() {
	Register(Spec{
		Name: PingCheck,
		Help: "ICMP packet loss and round-trip time to a peer",
		TimeoutFor: func(p Params) time.Duration {
			return time.Duration(float64(p.Int("count"))*p.Float("interval")*float64(time.Second)) +
				p.Duration("wait") + 15*time.Second
		},
		Peer: true,
		Params: Schema{
			{Name: "peer", Type: TypeHost, Target: TargetPeer, Required: true, Help: "IP address or hostname to ping (an agent node or an allowed peer)"},
			{Name: "count", Type: TypeInt, Default: "10", Min: 1, Max: 1000, Help: "echo requests to send"},
			{Name: "interval", Type: TypeFloat, Default: "0.2", Min: 0.2, Max: 10, Help: "seconds between requests (0.2 is ping's minimum for non-root)"},
			{Name: "wait", Type: TypeDuration, Default: "1s", Min: 1, Max: 10, Help: "how long to wait for each reply (whole seconds)"},
			{Name: "source", Type: TypeIface, Help: "interface name or address to send from (ping -I)"},
			{Name: "warn_loss_pct", Type: TypeFloat, Default: "0", Min: 0, Max: 100, Help: "warn when loss exceeds this percentage"},
			{Name: "max_loss_pct", Type: TypeFloat, Default: "10", Min: 0, Max: 100, Help: "fail when loss exceeds this percentage"},
			{Name: "max_rtt_ms", Type: TypeFloat, Default: "0", Min: 0, Max: 60000, Help: "fail when the average round trip exceeds this (0: no limit)"},
		},
	})
}

// PingCheck is the ping check's name.
const PingCheck = "ping"
