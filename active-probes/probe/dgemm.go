package probe

import "time"

// The dgemm check runs cuda/dgemm, which times cuBLAS DGEMM (FP64, on the tensor cores
// where the GPU has them) and a DAXPY kernel bound by HBM bandwidth on each GPU, and
// compares both with the GPU model's datasheet peaks times a ratio. Invasive: it keeps
// every GPU at full load for several seconds.
func init() {
	Register(Spec{
		Name:           DGEMMCheck,
		Help:           "FP64 DGEMM TFLOPS (cuBLAS) and DAXPY memory bandwidth per GPU, against the model's peaks",
		DefaultTimeout: 5 * time.Minute,
		Invasive:       true,
		Params: Schema{
			{Name: "n", Type: TypeInt, Default: "8192", Min: 1024, Max: 32768, Help: "matrix order of the DGEMM (n×n)"},
			{Name: "iters", Type: TypeInt, Default: "10", Min: 1, Max: 100, Help: "timed DGEMM and DAXPY iterations"},
			gpusParam,
			{Name: "ratio", Type: TypeFloat, Default: "0.7", Min: 0.05, Max: 1,
				Help: "fraction of the model's peak TFLOPS and GB/s each GPU must reach"},
			{Name: "thresholds", Type: TypeFile, Target: TargetFile,
				Help: "YAML or JSON list of {match, dgemm_tflops, daxpy_gbps, min_dgemm_tflops, min_daxpy_gbps} tried before the built-in table (a file under an allowed directory, at most 1 MiB)"},
		},
	})
}

// DGEMMCheck is the dgemm check's name.
const DGEMMCheck = "dgemm"
