package ship

import (
	"fmt"
	"testing"
	"time"
)

// benchBatch is a realistic 1000-record batch: mostly kernel lines of one node,
// a fifth pod lines from four containers.
func benchBatch() []Record {
	recs := make([]Record, 1000)
	for i := range recs {
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		if i%5 == 4 {
			recs[i] = Record{Time: ts, Source: SourcePod, Node: "gpu-node-017", Namespace: "training",
				Pod: "llama-70b-worker-3", Container: fmt.Sprintf("worker-%d", i%4), Stream: "stderr",
				Body: fmt.Sprintf("[rank%d]: NCCL INFO Channel %02d/0 : 3[3] -> 11[3] [send] via NET/IB/1/GDRDMA step %d", i%8, i%32, i)}
			continue
		}
		recs[i] = Record{Time: ts, Source: SourceKernel, Node: "gpu-node-017", Seq: uint64(100000 + i),
			BootID: "3f2e1d9c-8b7a-4c5d-9e0f-123456789abc", Level: 3 + i%4,
			Body: fmt.Sprintf("NVRM: Xid (PCI:0000:%02x:00): 13, pid=%d, name=python3, Graphics Exception: ESR 0x504648=0x1000b 0x504650=0x0", i%256, 4000+i)}
	}
	return recs
}

func reportRecords(b *testing.B, n int, bytes int) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(bytes), "body-bytes")
}

func BenchmarkOTLPEncode(b *testing.B) {
	recs := benchBatch()
	for _, gz := range []bool{true, false} {
		b.Run(fmt.Sprintf("gzip=%v", gz), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				body, err := encodeOTLP(recs, t0, gz)
				if err != nil {
					b.Fatal(err)
				}
				size = len(body)
			}
			reportRecords(b, len(recs), size)
		})
	}
}

func BenchmarkLokiEncode(b *testing.B) {
	recs := benchBatch()
	b.ReportAllocs()
	var size int
	for b.Loop() {
		body, err := encodeLoki(recs, t0)
		if err != nil {
			b.Fatal(err)
		}
		size = len(body)
	}
	reportRecords(b, len(recs), size)
}
