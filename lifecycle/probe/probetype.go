package probe

import "fmt"

// Type is the kind of a probe: liveness, readiness or startup.
type Type int

const (
	// Liveness: a container that fails it is killed (and restarted if its
	// restart policy says so).
	Liveness Type = iota
	// Readiness: a container is ready only while it passes it.
	Readiness
	// Startup: until it passes, the container is not started, and its
	// liveness and readiness probes do not run; a container that fails it
	// is killed like one that fails its liveness probe.
	Startup
)

// String returns the kubelet's name of the type, as its events say it:
// "Liveness", "Readiness" or "Startup".
func (t Type) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// field returns the name of the container field that holds the probe.
func (t Type) field() string {
	switch t {
	case Liveness:
		return "livenessProbe"
	case Readiness:
		return "readinessProbe"
	}
	return "startupProbe"
}

// allTypes lists every Type, in the order workers of a container are made.
var allTypes = [...]Type{Startup, Readiness, Liveness}

// result is what a probe says of a container instance, as the kubelet's
// results managers hold it.
type result int8

const (
	resultUnknown result = iota
	resultSuccess
	resultFailure
)

// initial is the result a probe of type t holds for an instance before
// its first decision: readiness fails (not ready until it passes),
// liveness succeeds (no restart until it fails), startup is unknown (not
// started until it passes).
func (t Type) initial() result {
	switch t {
	case Readiness:
		return resultFailure
	case Liveness:
		return resultSuccess
	}
	return resultUnknown
}
