package event

import "k8s.io/apimachinery/pkg/runtime"

// Recorder receives events about an object, normally a pod (or a
// *v1.ObjectReference to one of its containers, or to the Node for events
// about no pod). eventType is v1.EventTypeNormal or v1.EventTypeWarning;
// reason is the kubelet's CamelCase reason; messageFmt and args make the
// message, as fmt.Sprintf does. The object is shared: read it, do not
// modify it. See the package documentation for the concurrency rules.
type Recorder interface {
	Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any)
}

// RecorderFunc adapts a function to a Recorder. A nil RecorderFunc drops
// every event.
type RecorderFunc func(object runtime.Object, eventType, reason, messageFmt string, args ...any)

// Eventf calls f, unless f is nil.
func (f RecorderFunc) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	if f != nil {
		f(object, eventType, reason, messageFmt, args...)
	}
}

// Discard is a Recorder that drops every event: the default of every
// option of type Recorder in podkit.
var Discard Recorder = discard{}

type discard struct{}

func (discard) Eventf(runtime.Object, string, string, string, ...any) {}

// OrDiscard returns r, or Discard when r is nil, so a package can default
// an optional Recorder in one line.
func OrDiscard(r Recorder) Recorder {
	if r == nil {
		return Discard
	}
	return r
}

var (
	_ Recorder = RecorderFunc(nil)
	_ Recorder = discard{}
)
