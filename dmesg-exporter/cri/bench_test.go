package cri

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParseLine reports lines/s for a typical line.
func BenchmarkParseLine(b *testing.B) {
	for name, line := range map[string]string{
		"utc":    "2024-01-02T03:04:05.123456789Z stdout F [rank0] step 100 loss 2.3141 lr 3.0e-4 tokens/s 152340\n",
		"offset": "2024-01-02T04:04:05.123456789+01:00 stderr P NCCL WARN NET/IB : Got completion from peer 10.0.0.17 with status=12\n",
	} {
		in := []byte(line)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseLine(in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// BenchmarkParseAndReassemble runs testdata/0.log through ParseLine and a
// Reassembler.
func BenchmarkParseAndReassemble(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "0.log"))
	if err != nil {
		b.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	r := NewReassembler(0)
	n := 0
	for b.Loop() {
		for _, l := range lines {
			e, err := ParseLine(l)
			if err != nil {
				b.Fatal(err)
			}
			r.Add(e)
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
}
