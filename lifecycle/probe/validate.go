package probe

import (
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle/internal/action"
	"github.com/podkit/podkit/podworker"
)

// Defaults the API server gives a probe's unset (zero) fields, which the
// manager gives them too (a static pod's file is not defaulted).
const (
	DefaultPeriodSeconds    = 10
	DefaultTimeoutSeconds   = 1
	DefaultSuccessThreshold = 1
	DefaultFailureThreshold = 3
)

// handler is the action a probe runs.
type handler int

const (
	handlerExec handler = iota
	handlerHTTP
	handlerTCP
	handlerGRPC
)

// settings are a probe's fields, checked, with defaults filled in. Every
// duration fits a time.Duration: the fields are int32 seconds.
type settings struct {
	handler          handler
	initialDelay     time.Duration
	period           time.Duration
	timeout          time.Duration
	successThreshold int
	failureThreshold int
	// grace is the probe's terminationGracePeriodSeconds (liveness and
	// startup only), at most podworker.MaxGracePeriodSeconds; nil when
	// unset.
	grace *int64
}

// Validate checks every probe of pod as the manager will run them, and
// returns every problem found, joined (nil when there is none). The rules
// are the API server's, for pods that did not pass it (a static pod's
// file): exactly one handler (exec with a command, httpGet with an HTTP or
// HTTPS scheme, tcpSocket, grpc) whose port resolves, no negative number
// (zero means the API's default), a successThreshold of 1 for liveness
// and startup probes, a terminationGracePeriodSeconds only on those and
// above 0, and probes only on regular containers and sidecars. A value
// above podworker.MaxGracePeriodSeconds is not an error: it is cut to it.
// UpdatePodStatus reports the same errors; an agent may also refuse such
// a pod at admission with them.
func Validate(pod *v1.Pod) error {
	if pod == nil {
		return errors.New("probe: Validate needs a pod, got nil")
	}
	var errs []error
	for _, c := range probed(pod) {
		for _, t := range allTypes {
			if p := probeOf(c, t); p != nil {
				if _, err := complete(c, t, p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !podstatus.IsSidecar(c) && hasProbe(c) {
			errs = append(errs, fmt.Errorf("probe: init container %q: probes run only on sidecars (init containers with restartPolicy Always)", c.Name))
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if ec.LivenessProbe != nil || ec.ReadinessProbe != nil || ec.StartupProbe != nil {
			errs = append(errs, fmt.Errorf("probe: ephemeral container %q: ephemeral containers may not have probes", ec.Name))
		}
	}
	return errors.Join(errs...)
}

// probed returns the containers of pod whose probes run: the regular
// containers and the sidecars.
func probed(pod *v1.Pod) []*v1.Container {
	var cs []*v1.Container
	for i := range pod.Spec.InitContainers {
		if podstatus.IsSidecar(&pod.Spec.InitContainers[i]) {
			cs = append(cs, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		cs = append(cs, &pod.Spec.Containers[i])
	}
	return cs
}

// probeOf returns c's probe of type t, or nil.
func probeOf(c *v1.Container, t Type) *v1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	}
	return c.StartupProbe
}

func hasProbe(c *v1.Container) bool {
	return c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil
}

// complete checks p, c's probe of type t, and returns its settings.
func complete(c *v1.Container, t Type, p *v1.Probe) (settings, error) {
	var s settings
	bad := func(format string, args ...any) (settings, error) {
		return settings{}, fmt.Errorf("probe: container %q: %s.%s", c.Name, t.field(), fmt.Sprintf(format, args...))
	}
	var handlers []string
	if p.Exec != nil {
		handlers, s.handler = append(handlers, "exec"), handlerExec
	}
	if p.HTTPGet != nil {
		handlers, s.handler = append(handlers, "httpGet"), handlerHTTP
	}
	if p.TCPSocket != nil {
		handlers, s.handler = append(handlers, "tcpSocket"), handlerTCP
	}
	if p.GRPC != nil {
		handlers, s.handler = append(handlers, "grpc"), handlerGRPC
	}
	switch {
	case len(handlers) == 0:
		return bad("handler: none is set; want one of exec, httpGet, tcpSocket, grpc")
	case len(handlers) > 1:
		return bad("handler: %s are set; want exactly one", strings.Join(handlers, " and "))
	}
	switch s.handler {
	case handlerExec:
		if len(p.Exec.Command) == 0 {
			return bad("exec.command is empty")
		}
	case handlerHTTP:
		if _, err := action.ResolvePort(p.HTTPGet.Port, c); err != nil {
			return bad("httpGet.port: %v", err)
		}
		switch p.HTTPGet.Scheme {
		case "", v1.URISchemeHTTP, v1.URISchemeHTTPS:
		default:
			return bad("httpGet.scheme is %q; want HTTP or HTTPS", p.HTTPGet.Scheme)
		}
	case handlerTCP:
		if _, err := action.ResolvePort(p.TCPSocket.Port, c); err != nil {
			return bad("tcpSocket.port: %v", err)
		}
	case handlerGRPC:
		if p.GRPC.Port < 1 || p.GRPC.Port > 65535 {
			return bad("grpc.port is %d; want 1 to 65535", p.GRPC.Port)
		}
	}
	for _, f := range []struct {
		name string
		v    int32
		def  int32
	}{
		{"initialDelaySeconds", p.InitialDelaySeconds, 0},
		{"periodSeconds", p.PeriodSeconds, DefaultPeriodSeconds},
		{"timeoutSeconds", p.TimeoutSeconds, DefaultTimeoutSeconds},
		{"successThreshold", p.SuccessThreshold, DefaultSuccessThreshold},
		{"failureThreshold", p.FailureThreshold, DefaultFailureThreshold},
	} {
		if f.v < 0 {
			return bad("%s is %d; want 0 (default %d) or more", f.name, f.v, f.def)
		}
	}
	orDefault := func(v, def int32) int32 {
		if v == 0 {
			return def
		}
		return v
	}
	s.initialDelay = time.Duration(p.InitialDelaySeconds) * time.Second
	s.period = time.Duration(orDefault(p.PeriodSeconds, DefaultPeriodSeconds)) * time.Second
	s.timeout = time.Duration(orDefault(p.TimeoutSeconds, DefaultTimeoutSeconds)) * time.Second
	s.successThreshold = int(orDefault(p.SuccessThreshold, DefaultSuccessThreshold))
	s.failureThreshold = int(orDefault(p.FailureThreshold, DefaultFailureThreshold))
	if t != Readiness && s.successThreshold != 1 {
		return bad("successThreshold is %d; a %s probe's must be 1", p.SuccessThreshold, strings.ToLower(t.String()))
	}
	if g := p.TerminationGracePeriodSeconds; g != nil {
		if t == Readiness {
			return bad("terminationGracePeriodSeconds is set; only liveness and startup probes may set it")
		}
		if *g <= 0 {
			return bad("terminationGracePeriodSeconds is %d; want 1 or more", *g)
		}
		s.grace = new(min(*g, podworker.MaxGracePeriodSeconds))
	}
	return s, nil
}
