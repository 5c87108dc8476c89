// pciebw measures host<->GPU bandwidth over PCIe on each GPU: pinned host memory
// (cudaMallocHost), cudaMemcpyAsync host-to-device then device-to-host, timed with CUDA
// events, after a warm-up. It then copies a pattern to the GPU and back and compares it.
//
//   pciebw [--size-mb 256] [--iters 20] [--gpus 0,3]
//
// One JSON line per GPU on stdout (GB/s are 1e9 bytes per second):
//   {"gpu":0,"pci":"0000:07:00.0","name":"NVIDIA A100-SXM4-80GB","h2d_gbps":24.61,"d2h_gbps":24.12,"bytes":268435456,"iters":20}
//   {"gpu":3,"pci":"0000:4e:00.0","name":"NVIDIA A100-SXM4-80GB","error":"cudaMemcpyAsync(d2h): uncorrectable ECC error encountered"}
// Exit status: 0 when every GPU was measured, 1 when a GPU failed or CUDA sees none,
// 2 for a usage error.
#include "common.h"

#include <cstdint>

namespace {

struct Options {
    size_t bytes = size_t(256) << 20;
    int iters = 20;
    std::vector<int> gpus;
};

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "usage: pciebw [--size-mb N] [--iters N] [--gpus 0,1,...]\n");
            std::exit(2);
        }
        const char *v = argv[++i];
        if (a == "--size-mb") {
            o.bytes = size_t(probe::parsePositive("pciebw", "--size-mb", v, 16384)) << 20;
        } else if (a == "--iters") {
            o.iters = static_cast<int>(probe::parsePositive("pciebw", "--iters", v, 100000));
        } else if (a == "--gpus") {
            o.gpus = probe::parseGPUs("pciebw", v);
        } else {
            std::fprintf(stderr, "pciebw: unknown flag %s\nusage: pciebw [--size-mb N] [--iters N] [--gpus 0,1,...]\n", a.c_str());
            std::exit(2);
        }
    }
    return o;
}

// Buffers of one GPU's test, released however the test ends.
struct Buffers {
    void *host = nullptr, *dev = nullptr, *check = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Buffers() {
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
        if (stream) cudaStreamDestroy(stream);
        if (dev) cudaFree(dev);
        if (host) cudaFreeHost(host);
        if (check) cudaFreeHost(check);
    }
};

// timeCopies returns GB/s for iters copies of bytes in one direction.
double timeCopies(Buffers &b, void *dst, const void *src, size_t bytes, int iters, cudaMemcpyKind kind, const char *what) {
    for (int i = 0; i < 2; i++) {  // warm-up: wakes the link to its full speed
        probe::check(cudaMemcpyAsync(dst, src, bytes, kind, b.stream), what);
    }
    probe::check(cudaEventRecord(b.start, b.stream), "cudaEventRecord");
    for (int i = 0; i < iters; i++) {
        probe::check(cudaMemcpyAsync(dst, src, bytes, kind, b.stream), what);
    }
    probe::check(cudaEventRecord(b.stop, b.stream), "cudaEventRecord");
    probe::check(cudaEventSynchronize(b.stop), what);
    float ms = 0;
    probe::check(cudaEventElapsedTime(&ms, b.start, b.stop), "cudaEventElapsedTime");
    if (ms <= 0) {
        throw probe::CudaError{std::string(what) + ": no time elapsed"};
    }
    return double(bytes) * iters / (ms / 1e3) / 1e9;
}

void measure(const probe::GPU &g, const Options &o) {
    PROBE_CHECK(cudaSetDevice(g.index));
    Buffers b;
    PROBE_CHECK(cudaMallocHost(&b.host, o.bytes));
    PROBE_CHECK(cudaMalloc(&b.dev, o.bytes));
    PROBE_CHECK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
    PROBE_CHECK(cudaEventCreate(&b.start));
    PROBE_CHECK(cudaEventCreate(&b.stop));

    // A pattern that differs per word, so that a stuck or swapped line shows.
    auto *words = static_cast<uint32_t *>(b.host);
    for (size_t i = 0; i < o.bytes / sizeof(uint32_t); i++) {
        words[i] = static_cast<uint32_t>(i * 2654435761u) ^ 0xa5a5a5a5u;
    }
    double h2d = timeCopies(b, b.dev, b.host, o.bytes, o.iters, cudaMemcpyHostToDevice, "cudaMemcpyAsync(h2d)");
    double d2h = timeCopies(b, b.host, b.dev, o.bytes, o.iters, cudaMemcpyDeviceToHost, "cudaMemcpyAsync(d2h)");

    // Round trip of the pattern: what came back must be what went out.
    const size_t n = o.bytes < (size_t(16) << 20) ? o.bytes : (size_t(16) << 20);
    for (size_t i = 0; i < n / sizeof(uint32_t); i++) {
        words[i] = static_cast<uint32_t>(i * 2654435761u) ^ 0x5a5a5a5au;
    }
    PROBE_CHECK(cudaMallocHost(&b.check, n));
    PROBE_CHECK(cudaMemcpyAsync(b.dev, b.host, n, cudaMemcpyHostToDevice, b.stream));
    PROBE_CHECK(cudaMemcpyAsync(b.check, b.dev, n, cudaMemcpyDeviceToHost, b.stream));
    PROBE_CHECK(cudaStreamSynchronize(b.stream));
    if (std::memcmp(b.host, b.check, n) != 0) {
        throw probe::CudaError{"data differs after a host-device-host round trip"};
    }
    std::printf("%s,\"h2d_gbps\":%s,\"d2h_gbps\":%s,\"bytes\":%zu,\"iters\":%d}\n", probe::jsonHead(g).c_str(),
                probe::fmt(h2d).c_str(), probe::fmt(d2h).c_str(), o.bytes, o.iters);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
    Options o = parse(argc, argv);
    return probe::forEachGPU("pciebw", o.gpus, [&](const probe::GPU &g) { measure(g, o); });
}
