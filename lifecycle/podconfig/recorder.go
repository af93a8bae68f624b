package podconfig

import "k8s.io/apimachinery/pkg/runtime"

// Recorder receives the events a Config and a ManifestSource report:
// invalid pods in a snapshot, unusable manifest files. It is the one method
// of client-go's record.EventRecorder that podkit uses, so such a recorder
// fits as is, and so does lifecycle.RecorderFunc.
//
// Eventf is called from the goroutine calling SetPods or Merge, or from a
// ManifestSource's Run or Scan, possibly concurrently from several of them.
// It must not block for long and must not call back into the Config.
// object is the pod concerned, or a *v1.ObjectReference to the Node for
// events about no pod (a malformed manifest file). eventType is
// v1.EventTypeWarning.
type Recorder interface {
	Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any)
}

// nopRecorder drops every event; it is the default Recorder.
type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, string, string, string, ...any) {}

var _ Recorder = nopRecorder{}

// Event reasons the podconfig package records.
const (
	// ReasonFailedValidation: a config source sent a pod that cannot be
	// used (nil, no UID, a second pod with the same full name or UID, a
	// mirror pod from a source other than the API server). The pod is
	// ignored. lifecycle.Handler records it too, for the pods it is handed
	// directly.
	ReasonFailedValidation = "FailedValidation"
	// ReasonInvalidManifest: a manifest file could not be read, parsed or
	// prepared as a static pod. It contributes no pod until it is fixed.
	ReasonInvalidManifest = "InvalidManifest"
)
