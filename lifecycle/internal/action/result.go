package action

import "fmt"

// MaxOutput is how much of an HTTP response body or of an exec command's
// combined output an action keeps, in bytes: the kubelet's 10 KiB. The
// rest is read and dropped (HTTP) or cut off (exec).
const MaxOutput = 10 << 10

// Outcome is what an action came to.
type Outcome int

const (
	// Success: the action succeeded.
	Success Outcome = iota
	// Warning: a success with something to report (Result.Output says
	// what), as the kubelet's ProbeWarning.
	Warning
	// Failure: the action ran and failed; Result.Output says how.
	Failure
	// Unknown: the action could not be run; Result.Err says why.
	Unknown
)

// String returns the kubelet's word for the outcome: "success",
// "warning", "failure" or "unknown".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Warning:
		return "warning"
	case Failure:
		return "failure"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the result of one action. Output is at most MaxOutput bytes
// of what the container said (a response body, a command's output) or
// the failure's message; Err is set exactly when Outcome is Unknown;
// ExitCode is an exec command's, when it ran to its end.
type Result struct {
	Outcome  Outcome
	Output   string
	Err      error
	ExitCode int
}

// unknown is a Result for an action that could not run.
func unknown(err error) Result { return Result{Outcome: Unknown, Err: err} }

// failure is a Result for an action that failed with message msg.
func failure(msg string) Result { return Result{Outcome: Failure, Output: msg} }
