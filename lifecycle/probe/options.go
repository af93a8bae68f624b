package probe

import (
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/internal/action"
)

// ExecRunner runs an exec probe's command in a container: the one thing
// a runtime supplies for probes (httpGet, tcpSocket and grpc probes work
// without it). lifecycle/containerhook's ExecRunner is the same type, so
// one implementation serves both.
//
// Its one method is
//
//	ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (output []byte, exitCode int, err error)
//
// It runs cmd (the probe's command, with $(VAR) references to the
// container's literal env values expanded, as the kubelet does) in the
// container whose ID the runtime reported in its status, and returns the
// combined stdout and stderr (the manager keeps the first 10 KiB) and
// the exit code. It is called on a goroutine of its own, concurrently
// with other calls. ctx ends at timeout (the probe's timeoutSeconds) and
// the command must then be stopped; a call that does not return by then
// is abandoned (the check counts as a timeout failure) and no other exec
// of the same probe starts until it returns. err is for a command that
// could not run at all (the kubelet's "probe errored"): such a check
// decides nothing.
type ExecRunner = action.ExecRunner

// ExecRunnerFunc adapts a function to an ExecRunner.
type ExecRunnerFunc = action.ExecRunnerFunc

// Options configure a Manager. The zero value is valid: every field says
// what it defaults to.
type Options struct {
	// Exec runs exec probes. Defaults to none: an exec probe is then an
	// error UpdatePodStatus reports, and it never succeeds.
	Exec ExecRunner
	// Host, when set, is the host every httpGet, tcpSocket and grpc probe
	// that names none connects to, instead of the pod's IP (the PodIP of
	// the status given to UpdatePodStatus): "127.0.0.1" for a runtime
	// whose pods share the node's network. Defaults to the pod's IP.
	Host string
	// RequestSync asks for a sync of the pod (the agent's one way in for
	// runtime events): called when a liveness probe fails, a startup
	// probe decides, or a readiness probe changes its answer. It must not
	// block; it is called from the goroutine of the check that decided,
	// never with the manager's lock held. Defaults to none: the runtime
	// then learns of the change at the pod's next sync.
	RequestSync func(uid types.UID)
	// Recorder receives the kubelet's probe events (Unhealthy,
	// ProbeWarning), on a reference to the container. Defaults to
	// event.Discard.
	Recorder event.Recorder
	// Clock measures every period, delay and timeout. Defaults to the
	// real clock.
	Clock clock.WithDelayedExecution
	// Logger receives the manager's logs: a panicking callback at level 0,
	// each probe's result at V(4). Defaults to the zero Logger, which
	// discards.
	Logger logr.Logger
}

// complete fills in o's defaults; o is the caller's copy.
func (o *Options) complete() {
	o.Recorder = event.OrDiscard(o.Recorder)
	if o.RequestSync == nil {
		o.RequestSync = func(types.UID) {}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}
