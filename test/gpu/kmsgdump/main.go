// Command kmsgdump reads the kernel log with the dmesg-exporter's reader
// (dmesg-exporter/kmsg) from its oldest record until no record came for --idle,
// and writes each record as a JSON object, one per line: what the exporter would
// ship from this machine, for test/gpu/record.sh. The reader's counts (records,
// malformed, lost) go to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/kmsg"
)

type line struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Monotonic float64   `json:"monotonic_s"`
	Level     string    `json:"level"`
	Facility  string    `json:"facility"`
	Flags     string    `json:"flags"`
	Caller    string    `json:"caller,omitempty"`
	Message   string    `json:"message"`
	Dict      []string  `json:"dict,omitempty"`
}

func main() {
	path := flag.String("path", kmsg.DefaultDevice, "kernel log device or a file of its records")
	idle := flag.Duration("idle", time.Second, "stop when no record came for this long")
	flag.Parse()
	var malformed, lost int
	r, err := kmsg.Open(*path, kmsg.Options{
		MergeContinuations: true,
		OnMalformed:        func([]byte, error) { malformed++ },
		OnLoss:             func(l kmsg.Loss) { lost++ },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kmsgdump:", err)
		os.Exit(1)
	}
	defer r.Close()
	enc := json.NewEncoder(os.Stdout)
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), *idle)
		rec, err := r.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kmsgdump:", err)
			os.Exit(1)
		}
		n++
		l := line{Seq: rec.Seq, Time: rec.Time, Monotonic: rec.Monotonic.Seconds(), Level: rec.Level.String(),
			Facility: rec.Facility.String(), Flags: rec.Flags, Caller: rec.Caller, Message: rec.Message}
		for _, d := range rec.Dict {
			l.Dict = append(l.Dict, d.Key+"="+d.Value)
		}
		if err := enc.Encode(l); err != nil {
			fmt.Fprintln(os.Stderr, "kmsgdump:", err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "kmsgdump: %s: %d records, %d malformed, %d losses\n", *path, n, malformed, lost)
}
