// dgemm measures each GPU's FP64 compute and memory bandwidth:
//   - cuBLAS DGEMM (C = A·B, n×n, FP64; cuBLAS uses the FP64 tensor cores of A100/H100),
//     TFLOPS = 2·n³·iters / time;
//   - a DAXPY kernel (y = a·x + y) over arrays far larger than L2, bound by HBM bandwidth,
//     GB/s = 3·8 bytes·len·iters / time (read x, read y, write y).
// Both are timed with CUDA events after a warm-up, and their results are checked
// (the inputs are chosen so that every exact result is known): a GPU that computes
// fast but wrong fails.
//
//   dgemm [--n 8192] [--iters 10] [--gpus 0,3]
//
// One JSON line per GPU on stdout:
//   {"gpu":0,"pci":"0000:07:00.0","name":"NVIDIA A100-SXM4-80GB","n":8192,"iters":10,"dgemm_tflops":18.92,"daxpy_gbps":1741.30}
//   {"gpu":2,"pci":"0000:47:00.0","name":"NVIDIA A100-SXM4-80GB","error":"DGEMM result wrong: C[0]=16383 want 16384"}
// Exit status: 0 when every GPU was measured, 1 when a GPU failed or CUDA sees none,
// 2 for a usage error.
#include "common.h"

#include <cublas_v2.h>

namespace {

struct Options {
    int n = 8192;
    int iters = 10;
    std::vector<int> gpus;
};

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "usage: dgemm [--n N] [--iters N] [--gpus 0,1,...]\n");
            std::exit(2);
        }
        const char *v = argv[++i];
        if (a == "--n") {
            o.n = static_cast<int>(probe::parsePositive("dgemm", "--n", v, 65536));
        } else if (a == "--iters") {
            o.iters = static_cast<int>(probe::parsePositive("dgemm", "--iters", v, 10000));
        } else if (a == "--gpus") {
            o.gpus = probe::parseGPUs("dgemm", v);
        } else {
            std::fprintf(stderr, "dgemm: unknown flag %s\nusage: dgemm [--n N] [--iters N] [--gpus 0,1,...]\n", a.c_str());
            std::exit(2);
        }
    }
    return o;
}

void checkBlas(cublasStatus_t st, const char *call) {
    if (st != CUBLAS_STATUS_SUCCESS) {
        throw probe::CudaError{std::string(call) + ": cuBLAS status " + std::to_string(static_cast<int>(st))};
    }
}

__global__ void fill(double *p, size_t len, double v) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < len; i += size_t(gridDim.x) * blockDim.x) {
        p[i] = v;
    }
}

__global__ void daxpy(size_t len, double a, const double *__restrict__ x, double *__restrict__ y) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < len; i += size_t(gridDim.x) * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

struct Resources {
    double *a = nullptr, *b = nullptr, *c = nullptr, *x = nullptr, *y = nullptr;
    cublasHandle_t blas = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Resources() {
        if (blas) cublasDestroy(blas);
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
        if (stream) cudaStreamDestroy(stream);
        for (double *p : {a, b, c, x, y}) {
            if (p) cudaFree(p);
        }
    }
};

float elapsedMs(Resources &r) {
    PROBE_CHECK(cudaEventSynchronize(r.stop));
    float ms = 0;
    PROBE_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
    if (ms <= 0) {
        throw probe::CudaError{"no time elapsed"};
    }
    return ms;
}

void measure(const probe::GPU &g, const Options &o) {
    PROBE_CHECK(cudaSetDevice(g.index));
    cudaDeviceProp prop;
    PROBE_CHECK(cudaGetDeviceProperties(&prop, g.index));
    Resources r;
    PROBE_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    PROBE_CHECK(cudaEventCreate(&r.start));
    PROBE_CHECK(cudaEventCreate(&r.stop));
    const int threads = 256, blocks = prop.multiProcessorCount * 8;

    // DGEMM: A = 1, B = 2, so every element of C = A·B is exactly 2n.
    const size_t n = static_cast<size_t>(o.n), elems = n * n;
    PROBE_CHECK(cudaMalloc(&r.a, elems * sizeof(double)));
    PROBE_CHECK(cudaMalloc(&r.b, elems * sizeof(double)));
    PROBE_CHECK(cudaMalloc(&r.c, elems * sizeof(double)));
    fill<<<blocks, threads, 0, r.stream>>>(r.a, elems, 1.0);
    fill<<<blocks, threads, 0, r.stream>>>(r.b, elems, 2.0);
    PROBE_CHECK(cudaGetLastError());
    checkBlas(cublasCreate(&r.blas), "cublasCreate");
    checkBlas(cublasSetStream(r.blas, r.stream), "cublasSetStream");
    const double one = 1.0, zero = 0.0;
    auto gemm = [&]() {
        checkBlas(cublasDgemm(r.blas, CUBLAS_OP_N, CUBLAS_OP_N, o.n, o.n, o.n, &one, r.a, o.n, r.b, o.n, &zero, r.c, o.n),
                  "cublasDgemm");
    };
    gemm();  // warm-up: clocks up, kernels loaded
    PROBE_CHECK(cudaEventRecord(r.start, r.stream));
    for (int i = 0; i < o.iters; i++) {
        gemm();
    }
    PROBE_CHECK(cudaEventRecord(r.stop, r.stream));
    double secs = elapsedMs(r) / 1e3;
    double tflops = 2.0 * double(n) * double(n) * double(n) * o.iters / secs / 1e12;
    double got[2];
    PROBE_CHECK(cudaMemcpy(&got[0], r.c, sizeof(double), cudaMemcpyDeviceToHost));
    PROBE_CHECK(cudaMemcpy(&got[1], r.c + elems - 1, sizeof(double), cudaMemcpyDeviceToHost));
    for (double v : got) {
        if (v != 2.0 * double(n)) {
            throw probe::CudaError{"DGEMM result wrong: C=" + probe::fmt(v) + " want " + probe::fmt(2.0 * double(n))};
        }
    }
    cudaFree(r.a), cudaFree(r.b), cudaFree(r.c);
    r.a = r.b = r.c = nullptr;

    // DAXPY over two arrays of 2^27 doubles (1 GiB each, far beyond any L2), or less on
    // a small GPU: x = 1, y = 0, a = 1, so after k passes every y is exactly k.
    size_t freeB = 0, totalB = 0;
    PROBE_CHECK(cudaMemGetInfo(&freeB, &totalB));
    size_t len = size_t(1) << 27;
    while (len > (size_t(1) << 20) && 2 * len * sizeof(double) > freeB / 2) {
        len /= 2;
    }
    PROBE_CHECK(cudaMalloc(&r.x, len * sizeof(double)));
    PROBE_CHECK(cudaMalloc(&r.y, len * sizeof(double)));
    fill<<<blocks, threads, 0, r.stream>>>(r.x, len, 1.0);
    fill<<<blocks, threads, 0, r.stream>>>(r.y, len, 0.0);
    daxpy<<<blocks, threads, 0, r.stream>>>(len, 1.0, r.x, r.y);  // warm-up
    PROBE_CHECK(cudaGetLastError());
    PROBE_CHECK(cudaEventRecord(r.start, r.stream));
    for (int i = 0; i < o.iters; i++) {
        daxpy<<<blocks, threads, 0, r.stream>>>(len, 1.0, r.x, r.y);
    }
    PROBE_CHECK(cudaEventRecord(r.stop, r.stream));
    PROBE_CHECK(cudaGetLastError());
    secs = elapsedMs(r) / 1e3;
    double gbps = 3.0 * sizeof(double) * double(len) * o.iters / secs / 1e9;
    PROBE_CHECK(cudaMemcpy(&got[0], r.y, sizeof(double), cudaMemcpyDeviceToHost));
    PROBE_CHECK(cudaMemcpy(&got[1], r.y + len - 1, sizeof(double), cudaMemcpyDeviceToHost));
    for (double v : got) {
        if (v != double(o.iters + 1)) {
            throw probe::CudaError{"DAXPY result wrong: y=" + probe::fmt(v) + " want " + std::to_string(o.iters + 1)};
        }
    }
    std::printf("%s,\"n\":%d,\"iters\":%d,\"dgemm_tflops\":%s,\"daxpy_gbps\":%s}\n", probe::jsonHead(g).c_str(), o.n,
                o.iters, probe::fmt(tflops).c_str(), probe::fmt(gbps).c_str());
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
    Options o = parse(argc, argv);
    return probe::forEachGPU("dgemm", o.gpus, [&](const probe::GPU &g) { measure(g, o); });
}
