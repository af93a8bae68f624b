package lifecycle

import "k8s.io/apimachinery/pkg/runtime"

// Recorder receives the events the Handler reports about pods: admission
// rejections, unusable pods in an update (podconfig.ReasonFailedValidation),
// mirror pod failures. It is the one method of client-go's
// record.EventRecorder that podkit uses, so such a recorder fits as is; it
// also fits podconfig.Options.Recorder, so one RecorderFunc can serve both.
//
// Eventf is called from the sync loop's goroutine (the one running Run,
// Dispatch, a HandlePod* method or Housekeeping), inside its critical
// section. It must not block for long and must not call back into the
// Handler's Handle*, Dispatch or Housekeeping methods. object is the pod
// concerned. eventType is v1.EventTypeNormal or v1.EventTypeWarning.
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
// Reason of the admission.Result instead.
const (
	// ReasonFailedMirrorPod: creating or deleting a mirror pod failed;
	// housekeeping tries again on its next run.
	ReasonFailedMirrorPod = "FailedMirrorPod"
)
