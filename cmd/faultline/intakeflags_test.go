package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

// The flags that publish the leader's address are checked before the controller
// starts: a wrong one names itself.
func TestIntakeWhileLeading(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		flags intakeFlags
		want  string // "" : accepted
		run   bool   // something runs while leading
	}{
		{flags: intakeFlags{}},
		{flags: intakeFlags{listen: ":9404"}},
		{flags: intakeFlags{listen: ":9404", endpointSlice: "f-intake", advertise: "10.0.0.7"}, run: true},
		{flags: intakeFlags{listen: ":9404", endpointSlice: "f-intake", advertise: "fd00::7"}, run: true},
		{flags: intakeFlags{listen: ":9404", advertise: "10.0.0.7"}, want: "--intake-advertise-address needs --intake-endpointslice"},
		{flags: intakeFlags{endpointSlice: "f-intake", advertise: "10.0.0.7"}, want: "--intake-endpointslice needs --intake-listen"},
		{flags: intakeFlags{listen: ":9404", endpointSlice: "f-intake"}, want: "--intake-advertise-address"},
		{flags: intakeFlags{listen: ":9404", endpointSlice: "f-intake", advertise: "node-1"}, want: "an IP address is needed"},
		{flags: intakeFlags{listen: "localhost", endpointSlice: "f-intake", advertise: "10.0.0.7"}, want: "--intake-listen"},
		{flags: intakeFlags{listen: ":http", endpointSlice: "f-intake", advertise: "10.0.0.7"}, want: "a port number is needed"},
	} {
		run, err := tc.flags.whileLeading(nil, "faultline", log)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.flags, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one saying %q", tc.flags, err, tc.want)
		case tc.want == "" && (run != nil) != tc.run:
			t.Errorf("%+v: runs while leading: %v, want %v", tc.flags, run != nil, tc.run)
		}
	}
}
