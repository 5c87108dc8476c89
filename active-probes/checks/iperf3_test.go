package checks

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/promtest"
)

func TestParseIperf3Recorded(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/recorded/iperf3/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	c, err := ParseIperf3(read("client-loopback.json"))
	if err != nil || c.Error != "" || c.ReceivedGbps < 33.7 || c.ReceivedGbps > 33.8 || c.Retransmits != 34 || c.Seconds < 2 {
		t.Errorf("client: %+v %v", c, err)
	}
	s, err := ParseIperf3(read("server-loopback.json"))
	if err != nil || s.ReceivedGbps < 33.7 || s.ReceivedGbps > 33.8 {
		t.Errorf("server: %+v %v", s, err)
	}
	r, err := ParseIperf3(read("client-refused.json"))
	if err != nil || r.Error != "unable to connect to server: Connection refused" {
		t.Errorf("refused: %+v %v", r, err)
	}
	for _, bad := range []string{"", "iperf3: error - unable to connect", `{"start": {}, "end": {}}`} {
		if _, err := ParseIperf3([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// startServer starts a one-shot iperf3 server on 127.0.0.1 and reports how long it took.
func startServer(t *testing.T, bin string) *Iperf3Server {
	t.Helper()
	port := testenv.FreePorts(t, 1)[0]
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := StartIperf3Server(ctx, Iperf3ServerOptions{Path: bin, Bind: "127.0.0.1", Port: port, IdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Logf("iperf3 server listening on 127.0.0.1:%d after %s", port, time.Since(start).Round(time.Millisecond))
	return srv
}

// The real iperf3 from Debian, server and client, on 127.0.0.1.
func TestIperf3RealLoopback(t *testing.T) {
	bin := testenv.Binary(t, "iperf3")
	spec := mustSpec(t, "iperf3")

	srv := startServer(t, bin)
	res, prom := runOne(t, spec, &Iperf3{Path: bin}, probe.Params{"peer": "127.0.0.1", "port": strconv.Itoa(srv.Port), "seconds": "2", "min_gbps": "1"})
	wantStatus(t, "loopback", res.Status, probe.StatusPass)
	d := deviceStatus(t, res, "127.0.0.1", probe.StatusPass)
	if d.Values["received_gbps"] < 1 || d.Values["sent_gbps"] < 1 {
		t.Errorf("values %v", d.Values)
	}
	if res.Duration < 2*time.Second || res.Duration > 20*time.Second {
		t.Errorf("a 2 s test took %v", res.Duration)
	}
	promtest.Want(t, prom, "faultline_probe_result", map[string]string{"node": "gpu-node-07", "check": "iperf3", "device": "127.0.0.1"}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := srv.Wait(ctx)
	if err != nil || rep.ReceivedGbps <= 0 {
		t.Errorf("server report: %+v %v", rep, err)
	}
	t.Logf("client saw %.1f Gbit/s received, server %.1f Gbit/s", d.Values["received_gbps"], rep.ReceivedGbps)

	// Two reverse streams for one second, against an impossible minimum.
	srv = startServer(t, bin)
	res, _ = runOne(t, spec, &Iperf3{Path: bin}, probe.Params{"peer": "127.0.0.1", "port": strconv.Itoa(srv.Port),
		"seconds": "1", "streams": "2", "reverse": "true", "bind": "127.0.0.1", "min_gbps": "50000"})
	wantStatus(t, "impossible minimum", res.Status, probe.StatusFail)
	if !strings.Contains(res.Message, "below 50000.00") {
		t.Errorf("message %q", res.Message)
	}
}

func TestIperf3NoServer(t *testing.T) {
	bin := testenv.Binary(t, "iperf3")
	port := testenv.FreePorts(t, 1)[0]
	res, prom := runOne(t, mustSpec(t, "iperf3"), &Iperf3{Path: bin}, probe.Params{"peer": "127.0.0.1", "port": strconv.Itoa(port), "seconds": "1"})
	wantStatus(t, "refused", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "Connection refused") {
		t.Errorf("message %q", res.Message)
	}
	promtest.Want(t, prom, "faultline_probe_success", map[string]string{"check": "iperf3"}, 0)
}

func TestIperf3ServerErrors(t *testing.T) {
	bin := testenv.Binary(t, "iperf3")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = StartIperf3Server(ctx, Iperf3ServerOptions{Path: bin, Bind: "127.0.0.1", Port: port})
	if err == nil || !strings.Contains(err.Error(), "exited before listening") {
		t.Errorf("port in use: %v", err)
	}
	t.Logf("port in use: %v", err)
	if _, err := StartIperf3Server(ctx, Iperf3ServerOptions{Path: bin, Port: 0}); err == nil {
		t.Error("port 0 accepted")
	}
	if _, err := StartIperf3Server(ctx, Iperf3ServerOptions{Path: bin, Port: 5201, Bind: "-D"}); err == nil {
		t.Error("bind -D accepted")
	}
	if _, err := StartIperf3Server(ctx, Iperf3ServerOptions{Path: "/nonexistent/iperf3", Port: 5201}); err == nil {
		t.Error("missing iperf3 accepted")
	}

	// A server nobody uses goes away when closed.
	srv := startServer(t, bin)
	srv.Close()
	select {
	case <-srv.Done():
	case <-time.After(5 * time.Second):
		t.Error("server still running after Close")
	}
}

// The iperf3-server check through a Runner, as an agent runs it for a peer: it answers
// once the server listens, answers a second request for the port with the server
// still waiting, serves the client's one test, and the runner's Close stops a server no client came to.
func TestIperf3ServerCheck(t *testing.T) {
	bin := testenv.Binary(t, "iperf3")
	r := probe.NewRunner(nil, probe.Config{Node: "peer-1", Commands: map[string]string{"iperf3": bin}}, nil)
	ctx := context.Background()
	port := strconv.Itoa(testenv.FreePorts(t, 1)[0])
	res, err := r.Run(ctx, probe.Iperf3ServerCheck, probe.Params{"port": port, "bind": "127.0.0.1", "idle_timeout": "30s"})
	if err != nil || res.Status != probe.StatusPass || res.Values["port"] != float64(mustAtoi(t, port)) {
		t.Fatalf("iperf3-server: %+v, %v", res, err)
	}
	// Asked again before a client came (the first run's client side failed): the
	// waiting server is the answer, not a second one.
	if res, _ := r.Run(ctx, probe.Iperf3ServerCheck, probe.Params{"port": port, "bind": "127.0.0.1"}); res.Status != probe.StatusPass ||
		!strings.Contains(res.Message, "already listening") {
		t.Errorf("second request for the port: %+v", res)
	}
	client, err := r.Run(ctx, "iperf3", probe.Params{"peer": "127.0.0.1", "port": port, "seconds": "1", "min_gbps": "0.1"})
	if err != nil || client.Status != probe.StatusPass {
		t.Errorf("client against the check's server: %+v, %v", client, err)
	}
	// Once the test is served the port is free for the next server; Close stops it.
	eventually.True(t, 5*time.Second, "a new server on the port after the test", func() bool {
		again, _ := r.Run(ctx, probe.Iperf3ServerCheck, probe.Params{"port": port, "bind": "127.0.0.1"})
		return again.Status == probe.StatusPass
	})
	r.Close()
	eventually.True(t, 5*time.Second, "the server gone after the runner's Close", func() bool {
		// Listening, unlike connecting, does not use up a one-shot server's test.
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err == nil {
			l.Close()
		}
		return err == nil
	})
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
