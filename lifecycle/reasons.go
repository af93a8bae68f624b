package lifecycle

// Event reasons the lifecycle package records, through the event.Recorder
// of SyncLoopOptions.Recorder. Admission rejections use the Reason of the
// admission.Result instead, and unusable pods in an update
// podconfig.ReasonFailedValidation.
const (
	// ReasonFailedMirrorPod: creating or deleting a mirror pod failed;
	// housekeeping tries again on its next run.
	ReasonFailedMirrorPod = "FailedMirrorPod"
)
