package podconfig

import "github.com/podkit/podkit/lifecycle/internal/sourcepods"

// Event reasons the podconfig package records, through the
// event.Recorder of Options.Recorder or ManifestOptions.Recorder. Each is
// recorded as a v1.EventTypeWarning.
const (
	// ReasonFailedValidation: a config source sent a pod that cannot be
	// used (nil, no UID, a second pod with the same full name or UID, a
	// mirror pod from a source other than the API server). The pod is
	// ignored. lifecycle.SyncLoop records it too, for the pods of an update
	// no Config made (see PodUpdate.Checked).
	ReasonFailedValidation = sourcepods.ReasonFailedValidation
	// ReasonInvalidManifest: a manifest file could not be read, parsed or
	// prepared as a static pod. It contributes no pod until it is fixed.
	ReasonInvalidManifest = "InvalidManifest"
	// ReasonMultipleDocuments: a manifest file holds more than one YAML
	// document. Its first gives the pod; the others are ignored.
	ReasonMultipleDocuments = "MultipleDocuments"
)
