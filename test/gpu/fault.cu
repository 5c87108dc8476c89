// fault MODE: an application error on purpose, for test/gpu/record.sh and
// test/gpu/app-errors.sh, so the driver's reports of it (Xid lines, NVML events) can be
// recorded on a real GPU. Each is the job's error, not the GPU's: the driver tears the
// channel down and the GPU stays healthy (the scripts run the nvml check after them).
// No managed memory, nothing reset.
//
//   illegal-address  a write 512 GiB past a 1 MiB buffer (cudaErrorIllegalAddress)
//   misaligned       a double read from an odd address (cudaErrorMisalignedAddress)
//   trap             a kernel that executes a trap instruction (cudaErrorLaunchFailure)
//   spin             a kernel that never ends; the caller kills the process
//
// It prints {"mode","error","name"} and exits 0 when CUDA reported the error the mode
// provokes.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

__global__ void writeFar(double *p) { p[(size_t)1 << 36] = 1.0; }
__global__ void readMisaligned(double *p, double *out) { *out = *(double *)((char *)p + 1); }
__global__ void trap() { __trap(); }
__global__ void spin(volatile int *flag) {
    while (*flag == 0) {
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "illegal-address";
    double *buf = nullptr;
    cudaError_t err = cudaMalloc(&buf, 1 << 20);
    if (err != cudaSuccess) {
        fprintf(stderr, "fault: cudaMalloc: %s\n", cudaGetErrorString(err));
        return 1;
    }
    cudaMemset(buf, 0, 1 << 20);
    cudaError_t want;
    if (!strcmp(mode, "illegal-address")) {
        writeFar<<<1, 1>>>(buf);
        want = cudaErrorIllegalAddress;
    } else if (!strcmp(mode, "misaligned")) {
        readMisaligned<<<1, 1>>>(buf, buf + 8);
        want = cudaErrorMisalignedAddress;
    } else if (!strcmp(mode, "trap")) {
        trap<<<1, 1>>>();
        want = cudaErrorLaunchFailure;
    } else if (!strcmp(mode, "spin")) {
        spin<<<1, 1>>>((volatile int *)buf);
        fprintf(stderr, "fault: spinning until killed\n");
        want = cudaSuccess;
    } else {
        fprintf(stderr, "fault: unknown mode %s\n", mode);
        return 2;
    }
    err = cudaDeviceSynchronize();
    printf("{\"mode\":\"%s\",\"error\":\"%s\",\"name\":\"%s\"}\n", mode, cudaGetErrorString(err), cudaGetErrorName(err));
    return err == want ? 0 : 1;
}
