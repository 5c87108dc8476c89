// Command fake stands in for the programs the probes run where the real ones cannot
// work (no GPU, no DCGM): pciebw, dgemm, dcgmi, ping and nvidia-smi (--gpu-reset only:
// it resets nothing). The test binary builds it once and
// links it under each name; it checks its arguments the way the real program would,
// then prints a recorded output.
//
//	FAULTLINE_FAKE_OUTPUT_<PROG>  (PROG upper-case, "-" as "_": PCIEBW, NVIDIA_SMI, ...) the output file of
//	                       that program, when several fakes share one environment
//	FAULTLINE_FAKE_OUTPUT  file whose content goes to stdout (required); <file>.stderr
//	                       goes to stderr and <file>.exit holds the exit code, if present
//	FAULTLINE_FAKE_ARGS    file to which the arguments are appended as a JSON array
//	FAULTLINE_FAKE_SLEEP   duration to sleep before printing (to test timeouts)
//
// pciebw and dgemm print only the lines of the GPUs named by --gpus, as the real
// programs do.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	prog := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if f := os.Getenv("FAULTLINE_FAKE_ARGS"); f != "" {
		b, _ := json.Marshal(append([]string{prog}, args...))
		fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(fh, "%s\n", b)
			fh.Close()
		}
	}
	var gpus map[int]bool
	var err error
	switch prog {
	case "pciebw":
		gpus, err = checkFlags(args, map[string]bool{"--size-mb": true, "--iters": true, "--gpus": true})
	case "dgemm":
		gpus, err = checkFlags(args, map[string]bool{"--n": true, "--iters": true, "--gpus": true})
	case "dcgmi":
		err = checkDcgmi(args)
	case "ping":
		err = checkPing(args)
	case "nvidia-smi":
		err = checkNvidiaSMI(args)
	default:
		err = fmt.Errorf("unknown program name %q", prog)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		os.Exit(2)
	}
	if d := os.Getenv("FAULTLINE_FAKE_SLEEP"); d != "" {
		dur, err := time.ParseDuration(d)
		if err == nil {
			time.Sleep(dur)
		}
	}
	path := os.Getenv("FAULTLINE_FAKE_OUTPUT_" + strings.ToUpper(strings.ReplaceAll(prog, "-", "_")))
	if path == "" {
		path = os.Getenv("FAULTLINE_FAKE_OUTPUT")
	}
	if path == "" {
		fmt.Fprintf(os.Stderr, "%s (fake): FAULTLINE_FAKE_OUTPUT not set\n", prog)
		os.Exit(3)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s (fake): %v\n", prog, err)
		os.Exit(3)
	}
	if gpus != nil {
		out = filterGPUs(out, gpus)
	}
	os.Stdout.Write(out)
	if e, err := os.ReadFile(path + ".stderr"); err == nil {
		os.Stderr.Write(e)
	}
	code := 0
	if e, err := os.ReadFile(path + ".exit"); err == nil {
		code, _ = strconv.Atoi(strings.TrimSpace(string(e)))
	}
	os.Exit(code)
}

// checkFlags accepts "--name value" pairs with names in known, numeric values, and
// returns the set given by --gpus (nil if absent).
func checkFlags(args []string, known map[string]bool) (map[int]bool, error) {
	var gpus map[int]bool
	for i := 0; i < len(args); i += 2 {
		if !known[args[i]] {
			return nil, fmt.Errorf("unknown flag %q", args[i])
		}
		if i+1 >= len(args) {
			return nil, fmt.Errorf("flag %s needs a value", args[i])
		}
		v := args[i+1]
		if args[i] == "--gpus" {
			gpus = map[int]bool{}
			for _, f := range strings.Split(v, ",") {
				n, err := strconv.Atoi(f)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("--gpus %q: not a list of indices", v)
				}
				gpus[n] = true
			}
			continue
		}
		if n, err := strconv.Atoi(v); err != nil || n <= 0 {
			return nil, fmt.Errorf("flag %s: %q is not a positive integer", args[i], v)
		}
	}
	return gpus, nil
}

// checkDcgmi accepts "diag -r <1-4> -j [-i list] [--host h]" in any order after diag.
func checkDcgmi(args []string) error {
	if len(args) == 0 || args[0] != "diag" {
		return fmt.Errorf("expected the diag subcommand, got %q", args)
	}
	level, jsonOut := "", false
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "-j", "--json":
			jsonOut = true
		case "-r", "--run", "-i", "--gpuList", "--host":
			if i+1 >= len(args) {
				return fmt.Errorf("%s needs a value", args[i])
			}
			if args[i] == "-r" || args[i] == "--run" {
				level = args[i+1]
			}
			i++
		default:
			return fmt.Errorf("unknown argument %q", args[i])
		}
	}
	if level != "1" && level != "2" && level != "3" && level != "4" {
		return fmt.Errorf("-r %q: not a run level", level)
	}
	if !jsonOut {
		return fmt.Errorf("the fake only records JSON output (-j)")
	}
	return nil
}

// checkPing accepts iputils ping's "-n -c N -i S -W N [-I src] host", host last.
func checkPing(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: ping [options] <destination>")
	}
	for i := 0; i < len(args)-1; i++ {
		switch args[i] {
		case "-n":
		case "-c", "-i", "-W", "-I":
			if i+1 >= len(args)-1 {
				return fmt.Errorf("option %s needs a value before the destination", args[i])
			}
			if args[i] != "-I" {
				if _, err := strconv.ParseFloat(args[i+1], 64); err != nil {
					return fmt.Errorf("invalid argument %s %q", args[i], args[i+1])
				}
			}
			i++
		default:
			return fmt.Errorf("invalid option %q", args[i])
		}
	}
	if strings.HasPrefix(args[len(args)-1], "-") {
		return fmt.Errorf("usage: ping [options] <destination>")
	}
	return nil
}

// checkNvidiaSMI accepts "--gpu-reset [-i <id or PCI address>]", the only use the
// probes make of nvidia-smi.
func checkNvidiaSMI(args []string) error {
	if len(args) == 0 || args[0] != "--gpu-reset" {
		return fmt.Errorf("the fake only knows --gpu-reset, got %q", args)
	}
	switch len(args) {
	case 1:
		return nil
	case 3:
		if args[1] != "-i" || args[2] == "" || strings.HasPrefix(args[2], "-") {
			return fmt.Errorf("expected -i <gpu>, got %q", args[1:])
		}
		return nil
	}
	return fmt.Errorf("unexpected arguments %q", args[1:])
}

// filterGPUs keeps the JSON lines whose "gpu" is in the set, and every other line.
func filterGPUs(out []byte, gpus map[int]bool) []byte {
	var b bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Bytes()
		var l struct {
			GPU *int `json:"gpu"`
		}
		if json.Unmarshal(line, &l) == nil && l.GPU != nil && !gpus[*l.GPU] {
			continue
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
