package checks

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/test/testenv"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/promtest"
)

func TestParsePing(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/recorded/ping/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name string
		out  []byte
		want PingStats
	}{
		{"loopback", read("loopback-ok.txt"), PingStats{Transmitted: 5, Received: 5, RTTMin: 0.039, RTTAvg: 0.172, RTTMax: 0.696, RTTMdev: 0.262}},
		{"half lost", read("loss-50.txt"), PingStats{Transmitted: 20, Received: 10, LossPct: 50, RTTMin: 0.045, RTTAvg: 0.066, RTTMax: 0.202, RTTMdev: 0.046}},
		{"all lost", read("loss-100.txt"), PingStats{Transmitted: 3, LossPct: 100}},
		{"errors", []byte("--- 10.0.0.9 ping statistics ---\n3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2030ms\npipe 3\n"),
			PingStats{Transmitted: 3, Errors: 3, LossPct: 100}},
		{"duplicates", []byte("4 packets transmitted, 4 received, +1 duplicates, 0% packet loss, time 3004ms\nrtt min/avg/max/mdev = 0.1/0.2/0.3/0.05 ms\n"),
			PingStats{Transmitted: 4, Received: 4, RTTMin: 0.1, RTTAvg: 0.2, RTTMax: 0.3, RTTMdev: 0.05}},
		{"busybox", []byte("4 packets transmitted, 4 packets received, 0% packet loss\nround-trip min/avg/max = 0.061/0.075/0.094 ms\n"),
			PingStats{Transmitted: 4, Received: 4, RTTMin: 0.061, RTTAvg: 0.075, RTTMax: 0.094}},
	}
	for _, c := range cases {
		got, err := ParsePing(c.out)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
	if _, err := ParsePing([]byte("ping: connect: Network is unreachable\n")); err == nil {
		t.Error("an error parsed")
	}
}

// The real ping from Debian (iputils), to 127.0.0.1.
func TestPingRealLoopback(t *testing.T) {
	bin := testenv.Binary(t, "ping")
	res, prom := runOne(t, mustSpec(t, "ping"), &Ping{Path: bin}, probe.Params{"peer": "127.0.0.1", "count": "5", "max_rtt_ms": "50"})
	wantStatus(t, "loopback", res.Status, probe.StatusPass)
	d := deviceStatus(t, res, "127.0.0.1", probe.StatusPass)
	if d.Values["transmitted"] != 5 || d.Values["received"] != 5 || d.Values["loss_pct"] != 0 || d.Values["rtt_avg_ms"] <= 0 {
		t.Errorf("values %v", d.Values)
	}
	// 5 requests 0.2 s apart: about 0.8 s.
	if res.Duration < 700*time.Millisecond || res.Duration > 10*time.Second {
		t.Errorf("5 pings took %v", res.Duration)
	}
	promtest.Want(t, prom, "faultline_probe_value", map[string]string{"node": "gpu-node-07", "check": "ping", "device": "127.0.0.1", "metric": "loss_pct"}, 0)

	// With a source address (ping -I).
	res, _ = runOne(t, mustSpec(t, "ping"), &Ping{Path: bin}, probe.Params{"peer": "127.0.0.1", "count": "2", "source": "127.0.0.1"})
	wantStatus(t, "with source", res.Status, probe.StatusPass)
}

// Loss thresholds, on ping outputs recorded with real losses.
func TestPingLoss(t *testing.T) {
	spec := mustSpec(t, "ping")
	path, args := fake(t, "ping", "ping/loss-50.txt")
	res, _ := runOne(t, spec, &Ping{Path: path}, probe.Params{"peer": "127.0.0.1", "count": "20"})
	wantStatus(t, "50% loss", res.Status, probe.StatusFail)
	if !strings.Contains(res.Message, "50% packet loss (10 of 20), above 10%") {
		t.Errorf("message %q", res.Message)
	}
	if got := fakeArgs(t, args); got[0] != `["ping","-n","-c","20","-i","0.2","-W","1","127.0.0.1"]` {
		t.Errorf("argv %v", got)
	}
	res, _ = runOne(t, spec, &Ping{Path: path}, probe.Params{"peer": "127.0.0.1", "max_loss_pct": "60"})
	wantStatus(t, "50% loss, 60% allowed", res.Status, probe.StatusWarn)
	res, _ = runOne(t, spec, &Ping{Path: path}, probe.Params{"peer": "127.0.0.1", "max_loss_pct": "60", "warn_loss_pct": "50"})
	wantStatus(t, "50% loss, 50% tolerated", res.Status, probe.StatusPass)

	// No reply at all: ping exits 1, and that is a verdict, not an error.
	path, _ = fake(t, "ping", "ping/loss-100.txt")
	res, prom := runOne(t, spec, &Ping{Path: path}, probe.Params{"peer": "127.0.0.1", "count": "3"})
	wantStatus(t, "100% loss", res.Status, probe.StatusFail)
	if d := deviceStatus(t, res, "127.0.0.1", probe.StatusFail); d.Values["loss_pct"] != 100 {
		t.Errorf("values %v", d.Values)
	}
	if _, ok := promtest.Value(t, prom, "faultline_probe_value", map[string]string{"node": "gpu-node-07", "check": "ping", "device": "127.0.0.1", "metric": "rtt_avg_ms"}); ok {
		t.Error("an RTT was recorded with no reply")
	}

	// ping could not send (exit 2): an error.
	path, _ = fake(t, "ping", "ping/unreachable.txt")
	res, _ = runOne(t, spec, &Ping{Path: path}, probe.Params{"peer": "127.0.0.1"})
	wantStatus(t, "unreachable", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "exit 2") || !strings.Contains(res.Message, "Network is unreachable") {
		t.Errorf("message %q", res.Message)
	}

	// A source that would read as an option is refused before ping runs.
	if _, err := spec.Params.Resolve(probe.Params{"peer": "127.0.0.1", "source": "-f"}); err == nil {
		t.Error("source -f accepted")
	}
}
