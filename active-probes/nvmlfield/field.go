//go:build cgo

// Package nvmlfield reads NVML field values (nvmlDeviceGetFieldValues) for the probe
// agent's nvml check and event watcher, and names the GPU recovery action newer
// drivers report (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, read as an unsigned int on an
// H200 with 580.159.04).
package nvmlfield

import (
	"encoding/binary"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Uint reads one integer field of dev. An NVML older than the field answers the call
// with SUCCESS and the field with its own error (NOT_SUPPORTED or INVALID_ARGUMENT),
// which Uint returns.
func Uint(dev nvml.Device, id uint32) (uint64, nvml.Return) {
	v := []nvml.FieldValue{{FieldId: id}}
	if ret := dev.GetFieldValues(v); ret != nvml.SUCCESS {
		return 0, ret
	}
	if ret := nvml.Return(v[0].NvmlReturn); ret != nvml.SUCCESS {
		return 0, ret
	}
	switch nvml.ValueType(v[0].ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT, nvml.VALUE_TYPE_SIGNED_INT:
		return uint64(binary.NativeEndian.Uint32(v[0].Value[:4])), nvml.SUCCESS
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return binary.NativeEndian.Uint64(v[0].Value[:]), nvml.SUCCESS
	}
	return 0, nvml.ERROR_UNKNOWN // a double, or a type this program does not know
}
