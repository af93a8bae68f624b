package podenv

import (
	"errors"
	"fmt"
)

// ReasonCreateContainerConfigError is the kubelet's reason for a container
// waiting because its configuration (here: its environment) cannot be
// built yet: the runtime sets it as the container's waiting reason, with
// ConfigError.Message as the message, and tries again at the pod's next
// sync. The pod does not fail.
const ReasonCreateContainerConfigError = "CreateContainerConfigError"

// ConfigError is the error of a container whose environment cannot be
// built now: a required secret, config map or key is missing, a getter
// failed or panicked, a selector is not supported, a bound is exceeded.
// A runtime finds it with errors.As (or IsConfigError), keeps the
// container waiting with Reason and Message, and retries at the pod's next
// sync, as the kubelet does; it never fails the pod for it.
//
// Message never holds a secret's or config map's value: names and keys
// only.
type ConfigError struct {
	// Container is the container's name.
	Container string
	// Message is the kubelet's message for the failure, for the
	// container's waiting state and the runtime's Failed event
	// ("Error: " + Message).
	Message string
	// Err is the cause, when there is one (a getter's error, which may be
	// a NotFound API error).
	Err error
}

// Error returns the message, prefixed with the package and the container.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("podenv: container %q: %s", e.Container, e.Message)
}

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// Reason returns ReasonCreateContainerConfigError.
func (e *ConfigError) Reason() string { return ReasonCreateContainerConfigError }

// IsConfigError reports whether err is, or wraps, a *ConfigError.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

// configErrorf makes a ConfigError for container with a formatted
// message and no cause.
func configErrorf(container, format string, args ...any) *ConfigError {
	return &ConfigError{Container: container, Message: fmt.Sprintf(format, args...)}
}
