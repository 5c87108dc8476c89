package nvmlfield

// The recovery actions NVML reports (nvmlDeviceGpuRecoveryAction_t, the value of
// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), as the agent's event lines and the nvml
// check's messages name them.
const (
	RecoveryNone          = "none"
	RecoveryGPUReset      = "GPU reset"
	RecoveryNodeReboot    = "node reboot"
	RecoveryDrainP2P      = "drain P2P"
	RecoveryDrainAndReset = "drain and reset"
	// RecoveryUnknown: the action could not be read, or is one this program does
	// not know.
	RecoveryUnknown = "unknown"
)

// recoveryNames are the actions by their value: NVML_GPU_RECOVERY_ACTION_NONE (0)
// to NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET (4).
var recoveryNames = [...]string{RecoveryNone, RecoveryGPUReset, RecoveryNodeReboot, RecoveryDrainP2P, RecoveryDrainAndReset}

// RecoveryAction names a recovery action's value; false for one this program does
// not know (a later driver's).
func RecoveryAction(v uint64) (string, bool) {
	if v < uint64(len(recoveryNames)) {
		return recoveryNames[v], true
	}
	return RecoveryUnknown, false
}
