package checks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// gpuLine is one line printed by the CUDA programs in cuda/ (pciebw, dgemm): one JSON
// object per GPU. A GPU the program could not measure has "error" instead of numbers.
//
//	{"gpu":0,"pci":"0000:07:00.0","name":"NVIDIA A100-SXM4-80GB","h2d_gbps":24.1,"d2h_gbps":23.9,"bytes":268435456,"iters":20}
//	{"gpu":0,"pci":"0000:07:00.0","name":"NVIDIA A100-SXM4-80GB","n":8192,"iters":10,"dgemm_tflops":18.9,"daxpy_gbps":1650.2}
//	{"gpu":3,"pci":"0000:4e:00.0","name":"NVIDIA A100-SXM4-80GB","error":"cudaMemcpyAsync: uncorrectable ECC error encountered"}
type gpuLine struct {
	GPU   *int   `json:"gpu"`
	PCI   string `json:"pci"`
	Name  string `json:"name"`
	Error string `json:"error"`

	// pciebw
	H2DGBps *float64 `json:"h2d_gbps"`
	D2HGBps *float64 `json:"d2h_gbps"`
	Bytes   int64    `json:"bytes"`
	Iters   int      `json:"iters"`

	// dgemm
	N           int      `json:"n"`
	DGEMMTFLOPS *float64 `json:"dgemm_tflops"`
	DAXPYGBps   *float64 `json:"daxpy_gbps"`
}

// parseGPULines reads the JSON lines a CUDA program printed. Lines that are not JSON
// objects (a driver warning) are skipped; a JSON object without "gpu" is an error, and
// so is no line at all.
func parseGPULines(prog string, out []byte) ([]gpuLine, error) {
	var lines []gpuLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] != '{' {
			continue
		}
		var l gpuLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("%s output line %d: %v", prog, n, err)
		}
		if l.GPU == nil {
			return nil, fmt.Errorf("%s output line %d: no \"gpu\" field", prog, n)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s output: %v", prog, err)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s printed no result", prog)
	}
	sort.SliceStable(lines, func(i, j int) bool { return *lines[i].GPU < *lines[j].GPU })
	return lines, nil
}

func (l gpuLine) device() probe.DeviceResult {
	return probe.DeviceResult{ID: strconv.Itoa(*l.GPU), PCI: probe.NormalizePCI(l.PCI), Name: l.Name}
}

// gpuArg formats the --gpus argument of the CUDA programs.
func gpuArgs(p probe.Params) []string {
	if l := p.IntList("gpus"); len(l) > 0 {
		return []string{"--gpus", joinInts(l)}
	}
	return nil
}

// runGPUProgram runs one of the cuda/ programs (name is how its lines are attributed)
// with CUDA's device order matching NVML's, and parses its per-GPU lines; when they
// cannot be parsed the error carries the exit status and the tail of stderr.
func runGPUProgram(ctx context.Context, name, path string, args []string) ([]gpuLine, cmdOutput, error) {
	out, err := runCommand(ctx, path, args, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	if err != nil {
		return nil, out, err
	}
	lines, err := parseGPULines(name, out.Stdout)
	if err != nil {
		if tail := out.stderrTail(); tail != "" {
			err = fmt.Errorf("%w (exit %d: %s)", err, out.ExitCode, tail)
		}
		return nil, out, err
	}
	return lines, out, nil
}

// noteExit adds a program's non-zero exit to a result it otherwise produced: a warn
// at least, with what it said (a GPU it could not test also has its own line).
func noteExit(res *probe.Result, name string, out cmdOutput) {
	if out.ExitCode != 0 {
		res.Message = joinMsg(res.Message, exitNote(name, out))
		res.Status = probe.Worst(res.Status, probe.StatusWarn)
	}
}

// joinInts formats a list as "0,3,5".
func joinInts(l []int) string {
	s := make([]string, len(l))
	for i, n := range l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
