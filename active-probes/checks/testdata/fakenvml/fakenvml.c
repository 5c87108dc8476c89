/*
 * A stand-in for libnvidia-ml.so.1 in tests where no GPU is: the probe agent opens
 * it like the real library (--nvml-library) and its nvml check sees as many GPUs as
 * $FAULTLINE_FAKE_NVML_GPUS says (8 when unset), none of which it can open. Only
 * the entry points the nvml check calls before it opens a GPU are here; the agent
 * binds the others lazily and never calls them.
 */
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;

enum { NVML_SUCCESS = 0, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3 };

nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }
nvmlReturn_t nvmlInit(void) { return NVML_SUCCESS; }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
	const char *v = "550.54.15";
	if (version == NULL || length <= strlen(v))
		return NVML_ERROR_INVALID_ARGUMENT;
	strcpy(version, v);
	return NVML_SUCCESS;
}

static unsigned int gpus(void) {
	const char *v = getenv("FAULTLINE_FAKE_NVML_GPUS");
	return v == NULL ? 8 : (unsigned int)atoi(v);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
	*count = gpus();
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
	(void)index;
	(void)device;
	return NVML_ERROR_NOT_SUPPORTED;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
	return nvmlDeviceGetHandleByIndex_v2(index, device);
}

const char *nvmlErrorString(nvmlReturn_t result) {
	switch (result) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	}
	return "Unknown Error";
}
