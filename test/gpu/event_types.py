"""Lists, per GPU, the NVML event types the driver supports
(nvmlDeviceGetSupportedEventTypes) and a few facts the probes read (PCIe link,
NVLink, MIG), through nvidia-ml-py, as a cross-check of the agent's own
registrations (faultline-probe-agent nvml-events). Run by test/gpu/record.sh."""
import json

import pynvml as n

TYPES = {
    "SingleBitEccError": 0x1, "DoubleBitEccError": 0x2, "PState": 0x4,
    "XidCriticalError": 0x8, "Clock": 0x10, "PowerSourceChange": 0x80,
    "MigConfigChange": 0x100, "SingleBitEccErrorStorm": 0x200,
    "DramRetirementEvent": 0x400, "DramRetirementFailure": 0x800,
    "NonFatalPoisonError": 0x1000, "FatalPoisonError": 0x2000,
    "GpuUnavailableError": 0x4000, "GpuRecoveryAction": 0x8000,
}


def call(f, *a):
    try:
        return f(*a)
    except n.NVMLError as e:
        return "error: " + str(e)


n.nvmlInit()
out = {"driver": call(n.nvmlSystemGetDriverVersion), "nvml": call(n.nvmlSystemGetNVMLVersion),
       "cuda_driver": call(n.nvmlSystemGetCudaDriverVersion_v2), "gpus": []}
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    mask = call(n.nvmlDeviceGetSupportedEventTypes, h)
    g = {"index": i, "name": call(n.nvmlDeviceGetName, h), "pci": call(lambda: n.nvmlDeviceGetPciInfo(h).busId),
         "supported_event_mask": mask,
         "pcie": {"cur_gen": call(n.nvmlDeviceGetCurrPcieLinkGeneration, h),
                  "max_gen": call(n.nvmlDeviceGetMaxPcieLinkGeneration, h),
                  "cur_width": call(n.nvmlDeviceGetCurrPcieLinkWidth, h),
                  "max_width": call(n.nvmlDeviceGetMaxPcieLinkWidth, h)},
         "mig_mode": call(n.nvmlDeviceGetMigMode, h),
         "nvlink_state": [call(n.nvmlDeviceGetNvLinkState, h, l) for l in range(18)]}
    # The recovery action the driver asks for (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION),
    # which the agent reads after a recovery-action event.
    try:
        fv = n.nvmlDeviceGetFieldValues(h, [230])[0]
        g["recovery_action_field"] = {"nvmlReturn": fv.nvmlReturn, "valueType": fv.valueType, "value": fv.value.uiVal}
    except Exception as e:  # an NVML without the field
        g["recovery_action_field"] = "error: " + str(e)
    if isinstance(mask, int):
        g["supported"] = sorted(k for k, v in TYPES.items() if mask & v)
        g["unsupported"] = sorted(k for k, v in TYPES.items() if not mask & v)
    out["gpus"].append(g)
print(json.dumps(out, indent=1, default=str))
