// Shared helpers of the faultline CUDA probes (pciebw.cu, dgemm.cu): command-line
// parsing, GPU selection and JSON output. One JSON object per GPU, one per line, on
// stdout; diagnostics on stderr.
#pragma once

#include <cuda_runtime.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace probe {

// A CUDA call that failed, with the call named: "cudaMemcpyAsync(h2d): out of memory".
struct CudaError {
    std::string what;
};

inline void check(cudaError_t err, const char *call) {
    if (err != cudaSuccess) {
        throw CudaError{std::string(call) + ": " + cudaGetErrorString(err)};
    }
}

#define PROBE_CHECK(call) ::probe::check((call), #call)

// parsePositive reads a positive integer flag value or exits with status 2.
inline long parsePositive(const char *prog, const char *flag, const char *v, long max) {
    errno = 0;
    char *end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n <= 0 || n > max) {
        std::fprintf(stderr, "%s: %s %s: want an integer between 1 and %ld\n", prog, flag, v, max);
        std::exit(2);
    }
    return n;
}

// parseGPUs reads "0,3,5" or exits with status 2.
inline std::vector<int> parseGPUs(const char *prog, const char *v) {
    std::vector<int> out;
    std::string s(v);
    size_t start = 0;
    while (start <= s.size()) {
        size_t comma = s.find(',', start);
        std::string f = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        char *end = nullptr;
        long n = std::strtol(f.c_str(), &end, 10);
        if (f.empty() || *end != '\0' || n < 0 || n > 1023) {
            std::fprintf(stderr, "%s: --gpus %s: want a comma-separated list of GPU indices\n", prog, v);
            std::exit(2);
        }
        out.push_back(static_cast<int>(n));
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    return out;
}

// selectGPUs returns the GPUs to test: the --gpus list, or all of them. It exits with
// status 1 when CUDA sees no GPU, and 2 when the list names a GPU that does not exist.
inline std::vector<int> selectGPUs(const char *prog, const std::vector<int> &wanted) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        std::fprintf(stderr, "%s: cudaGetDeviceCount: %s\n", prog,
                     err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device");
        std::exit(1);
    }
    if (wanted.empty()) {
        std::vector<int> all;
        for (int i = 0; i < count; i++) {
            all.push_back(i);
        }
        return all;
    }
    for (int g : wanted) {
        if (g >= count) {
            std::fprintf(stderr, "%s: --gpus: GPU %d does not exist (%d GPUs)\n", prog, g, count);
            std::exit(2);
        }
    }
    return wanted;
}

// jsonString quotes s for JSON.
inline std::string jsonString(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    return out + "\"";
}

// Identity of a GPU: its PCI address (domain:bus:device.function, as sysfs writes it)
// and its name. With CUDA_DEVICE_ORDER=PCI_BUS_ID (the probes set it) CUDA's indices
// are NVML's and nvidia-smi's.
struct GPU {
    int index = 0;
    std::string pci;
    std::string name;
};

inline GPU describe(int dev) {
    GPU g;
    g.index = dev;
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
        g.pci = buf;
        g.name = prop.name;
    }
    return g;
}

// jsonHead starts a GPU's line: {"gpu":0,"pci":"0000:07:00.0","name":"..."
inline std::string jsonHead(const GPU &g) {
    return "{\"gpu\":" + std::to_string(g.index) + ",\"pci\":" + jsonString(g.pci) + ",\"name\":" + jsonString(g.name);
}

// printError prints the line of a GPU that could not be measured.
inline void printError(const GPU &g, const std::string &what) {
    std::printf("%s,\"error\":%s}\n", jsonHead(g).c_str(), jsonString(what).c_str());
    std::fflush(stdout);
}

// forEachGPU measures each selected GPU in turn; a GPU whose measurement throws gets
// an error line, and the device is reset so a sticky error does not spill into the
// next GPU's test. It returns the exit status: 1 if any GPU failed.
template <typename Measure>
int forEachGPU(const char *prog, const std::vector<int> &wanted, Measure measure) {
    int failed = 0;
    for (int dev : selectGPUs(prog, wanted)) {
        GPU g = describe(dev);
        try {
            measure(g);
        } catch (const CudaError &e) {
            printError(g, e.what);
            failed++;
            cudaDeviceReset();
        }
    }
    return failed ? 1 : 0;
}

inline std::string fmt(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

}  // namespace probe
