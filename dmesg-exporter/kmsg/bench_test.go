package kmsg

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var benchRecords = map[string]string{
	"plain":  "6,1804,47700428483,-;wlp4s0: associated\n",
	"caller": "4,1002,61234567,-,caller=T2345;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n",
	"dict":   "6,1004,62000000,-,caller=T99;mlx5_core 0000:5e:00.0: Port: 1 Link DOWN\n SUBSYSTEM=pci\n DEVICE=+pci:0000:5e:00.0\n",
	"escape": "6,1,1,-,caller=T1;Command line: initrd=\\x5cucode.img initrd=\\x5cinitramfs-linux.img rw root=/dev/mapper/system\n",
}

// BenchmarkParse reports records/s per record shape, and over the records
// of testdata/sample.kmsg.
func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"plain", "caller", "dict", "escape"} {
		rec := []byte(benchRecords[name])
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
	b.Run("sample", func(b *testing.B) {
		recs := sampleRecords(b)
		size := 0
		for _, r := range recs {
			size += len(r)
		}
		b.SetBytes(int64(size / len(recs)))
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if _, err := Parse(recs[n%len(recs)]); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// sampleRecords splits testdata/sample.kmsg into its records.
func sampleRecords(b *testing.B) [][]byte {
	data, err := os.ReadFile(filepath.Join("testdata", "sample.kmsg"))
	if err != nil {
		b.Fatal(err)
	}
	var recs [][]byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if line[0] == ' ' && len(recs) > 0 {
			recs[len(recs)-1] = append(recs[len(recs)-1], line...)
			continue
		}
		recs = append(recs, append([]byte(nil), line...))
	}
	return recs
}

// BenchmarkReaderStream measures the stream reader end to end (framing,
// parsing, accounting) over an in-memory copy of testdata/sample.kmsg
// repeated.
func BenchmarkReaderStream(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "sample.kmsg"))
	if err != nil {
		b.Fatal(err)
	}
	const copies = 1000
	input := bytes.Repeat(data, copies)
	perPass := 11 * copies
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	records := 0
	for b.Loop() {
		rd := NewReader(bytes.NewReader(input), Options{BootTime: time.Unix(1, 0)})
		for {
			_, err := rd.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			records++
		}
	}
	if records != perPass*b.N {
		b.Fatalf("%d records, want %d", records, perPass*b.N)
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}
