package lifecycle

import "k8s.io/apimachinery/pkg/runtime"

// Recorder receives the events the lifecycle package reports about pods and
// the node: admission rejections, invalid pods from a source, malformed
// manifest files. It is the one method of client-go's record.EventRecorder
// that podkit uses, so such a recorder fits as is.
//
// Eventf is called from the goroutine that is handling the pod (the sync
// loop, a manifest source's Run, ShutdownNode), possibly concurrently from
// several of them. It must not block for long and must not call back into
// the Handler. object is the pod concerned, or a *v1.ObjectReference to the
// Node for events about no pod (a malformed manifest file). eventType is
// v1.EventTypeNormal or v1.EventTypeWarning.
type Recorder interface {
	Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any)
}

// RecorderFunc adapts a function to a Recorder.
type RecorderFunc func(object runtime.Object, eventType, reason, messageFmt string, args ...any)

// Eventf calls f.
func (f RecorderFunc) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	f(object, eventType, reason, messageFmt, args...)
}

// nopRecorder drops every event; it is the default Recorder.
type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, string, string, string, ...any) {}

var (
	_ Recorder = RecorderFunc(nil)
	_ Recorder = nopRecorder{}
)

// Event reasons the lifecycle package records. Admission rejections use the
// Reason of the PodAdmitResult instead.
const (
	// ReasonFailedMirrorPod: creating or deleting a mirror pod failed;
	// housekeeping tries again on its next run.
	ReasonFailedMirrorPod = "FailedMirrorPod"
)
