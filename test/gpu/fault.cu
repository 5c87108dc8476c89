// fault: an application error on purpose, for test/gpu/record.sh. One kernel writes
// through a pointer to memory it never allocated; CUDA answers
// cudaErrorIllegalAddress and the driver logs the MMU fault as an Xid (13 or 31 by
// GPU generation) with the lines that come with it. It is the job's error, not the
// GPU's: the channel is torn down and the GPU stays healthy (record.sh runs the nvml
// check after it). No managed memory, nothing reset.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void writeFar(double *p) { p[(size_t)1 << 36] = 1.0; }  // 512 GiB past the buffer

int main() {
    double *buf = nullptr;
    cudaError_t err = cudaMalloc(&buf, 1 << 20);
    if (err != cudaSuccess) {
        fprintf(stderr, "fault: cudaMalloc: %s\n", cudaGetErrorString(err));
        return 1;
    }
    writeFar<<<1, 1>>>(buf);
    err = cudaDeviceSynchronize();
    printf("{\"error\":\"%s\",\"name\":\"%s\"}\n", cudaGetErrorString(err), cudaGetErrorName(err));
    return err == cudaErrorIllegalAddress ? 0 : 1;
}
