package hollowruntime

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Program is what a hollow container does in one run.
type Program struct {
	// Exits is true when the container ends on its own, After after it
	// started, with Code; false when it runs until it is stopped.
	Exits bool
	After time.Duration
	Code  int32
	// IgnoresTerm is true when SIGTERM does not end it: it is stopped at
	// the end of its grace period (code 137).
	IgnoresTerm bool
}

// ProgramFunc says what container of pod does in its next run; init says
// whether it is an init container (a sidecar's restartPolicy is on c). An
// error keeps the container waiting in CreateContainerConfigError with the
// error as its message, retried at each SyncPod. Called from the hooks'
// goroutines, concurrently, without the runtime's lock; it must not block.
type ProgramFunc func(pod *v1.Pod, c *v1.Container, init bool) (Program, error)

// AnnotationPrefix, followed by a container's name, is the annotation that
// scripts the container's Program (ParseProgram's syntax), for
// DefaultProgram.
const AnnotationPrefix = "hollow.podkit.io/"

// DefaultProgram is the default Options.Program: the program of the
// container's annotation (AnnotationPrefix + name, see ParseProgram) when
// the pod has one; else a regular init container completes at once
// (code 0), and any other container runs until it is stopped and exits on
// SIGTERM.
func DefaultProgram(pod *v1.Pod, c *v1.Container, init bool) (Program, error) {
	if s, ok := pod.Annotations[AnnotationPrefix+c.Name]; ok {
		p, err := ParseProgram(s)
		if err != nil {
			return Program{}, fmt.Errorf("annotation %s%s: %w", AnnotationPrefix, c.Name, err)
		}
		return p, nil
	}
	if init && (c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways) {
		return Program{Exits: true}, nil
	}
	return Program{}, nil
}

// ParseProgram parses a program from space-separated words:
//
//	run          runs until it is stopped (the default)
//	exit=<code>  exits on its own with code (0 to 255)
//	after=<d>    ... that long after it started (a Go duration; default 0)
//	ignore-term  SIGTERM does not end it
//
// "exit=1 after=2s" fails two seconds after each start. An unknown word,
// a bad code or duration, or after= without exit= is an error.
func ParseProgram(s string) (Program, error) {
	var p Program
	hasAfter := false
	for _, w := range strings.Fields(s) {
		key, val, hasVal := strings.Cut(w, "=")
		switch {
		case key == "run" && !hasVal:
		case key == "ignore-term" && !hasVal:
			p.IgnoresTerm = true
		case key == "exit" && hasVal:
			code, err := strconv.ParseInt(val, 10, 32)
			if err != nil || code < 0 || code > 255 {
				return Program{}, fmt.Errorf("exit code %q is not in 0-255", val)
			}
			p.Exits, p.Code = true, int32(code)
		case key == "after" && hasVal:
			d, err := time.ParseDuration(val)
			if err != nil || d < 0 {
				return Program{}, fmt.Errorf("after=%q is not a duration of 0 or more", val)
			}
			p.After, hasAfter = d, true
		default:
			return Program{}, fmt.Errorf("unknown word %q (want run, exit=<code>, after=<duration>, ignore-term)", w)
		}
	}
	if hasAfter && !p.Exits {
		return Program{}, fmt.Errorf("after= without exit=")
	}
	return p, nil
}
