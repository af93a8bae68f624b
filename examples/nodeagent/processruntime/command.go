package processruntime

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// This file decides what a container's process runs: its argv, env and
// working directory, from its spec and its image's configuration
// (imageconfig.go), by the rules of Kubernetes and of the container
// runtimes (containerd's, which Docker's were):
//
//   - command given: command + args; the image's entrypoint and cmd are
//     not used;
//   - args only: the image's entrypoint + args (its cmd is not used; an
//     image without entrypoint runs args as the command, so busybox's
//     args [sh, -c, ...] run sh);
//   - neither: the image's entrypoint + its cmd;
//   - $(VAR) in the spec's command and args is expanded before (as the
//     kubelet expands them, lifecycle/podenv's ExpandCommandAndArgs, on
//     the spec the runtime is given); the image's entrypoint and cmd are
//     not;
//   - env: the image's, then the container's over it;
//   - working directory: the container's, else the image's, else the
//     pod's scratch directory (a runtime would use "/").
//
// A container that needs its image's configuration when the runtime has
// none (an image in no table) waits in CreateContainerConfigError; one
// left with no command at all waits in CreateContainerError, as
// containerd's "no command specified" makes it wait on a kubelet.

// ReasonCreateContainerError is the waiting reason of a container whose
// image's configuration and spec together give no command (an image with
// neither entrypoint nor cmd, and a container with neither command nor
// args), as the kubelet names a runtime's refusal to create a container.
// The container is retried at each SyncPod.
const ReasonCreateContainerError = "CreateContainerError"

// ReasonRunContainerError is the waiting reason of a container whose
// process could not be started (its program does not exist, its working
// directory is missing), until it is started again; a later failure waits
// in CrashLoopBackOff. The kubelet's name.
const ReasonRunContainerError = "RunContainerError"

// ReasonHostProgram is the reason of the warning that a container of an
// image runs the node's own program of its command, not the image's
// (which the runtime never pulls): sent once per container in the pod's
// life, at its first start.
const ReasonHostProgram = "HostProgram"

// launch is what a container's process runs.
type launch struct {
	// argv is the command and its arguments; argv[0] is looked up in path
	// when it holds no slash.
	argv []string
	// env is the process's environment, each name once.
	env []string
	// path is the PATH argv[0] is looked up in.
	path string
	// dir is the working directory; "" for the pod's scratch directory.
	dir string
	// fromImage says the command came from the image's configuration,
	// which imageSource describes, for the warning.
	fromImage   bool
	imageSource string
	// applet says argv is [the node's multi-call program, applet, args...]
	// (ImageConfig.Multicall).
	applet bool
}

// launchOf resolves what container spec of pod runs, or why it waits.
// spec's command and args are taken as they are (already expanded).
func (r *Runtime) launchOf(pod *v1.Pod, spec *v1.Container) (launch, *reasonMessage) {
	spec = r.withBuiltEnv(pod, spec)
	cfg, known := r.imageConfig(spec.Image)
	var l launch
	l.env, l.path, l.dir = r.processEnv(pod, spec, cfg, known)
	switch {
	case len(spec.Command) > 0:
		l.argv = append(append([]string(nil), spec.Command...), spec.Args...)
	case !known:
		what := "neither command nor args"
		if len(spec.Args) > 0 {
			what = "args but no command"
		}
		return launch{}, &reasonMessage{ReasonCreateContainerConfigError, fmt.Sprintf(
			"container has %s, and image %q is not in this node's image table, so its entrypoint and cmd are unknown: give the container a command, or add the image to the node's image configs", what, spec.Image)}
	default:
		entrypoint := cfg.Entrypoint
		if len(entrypoint) == 1 && entrypoint[0] == "" {
			entrypoint = nil
		}
		args := spec.Args
		if len(spec.Args) == 0 {
			args = cfg.Cmd
		}
		l.argv = append(append([]string(nil), entrypoint...), args...)
		l.fromImage = true
		l.imageSource = fmt.Sprintf("entrypoint %q, cmd %q", entrypoint, cfg.Cmd)
	}
	if known && len(l.argv) > 0 {
		l.argv, l.applet = r.multicalls.argv(cfg.Multicall, l.argv)
	}
	if len(l.argv) == 0 || l.argv[0] == "" {
		return launch{}, &reasonMessage{ReasonCreateContainerError, fmt.Sprintf("no command specified: the container has none and image %q has neither entrypoint nor cmd", spec.Image)}
	}
	return l, nil
}

// processEnv is the environment (each name once), the PATH and the
// working directory ("" for the pod's scratch directory) of a process of
// container spec, whose image's configuration is cfg when known: what
// its exec sessions get too.
func (r *Runtime) processEnv(pod *v1.Pod, spec *v1.Container, cfg ImageConfig, known bool) (env []string, path, dir string) {
	withImage := spec
	if known && len(cfg.Env) > 0 {
		c := *spec
		c.Env = make([]v1.EnvVar, 0, len(cfg.Env)+len(spec.Env))
		for _, kv := range cfg.Env {
			k, v, _ := strings.Cut(kv, "=")
			c.Env = append(c.Env, v1.EnvVar{Name: k, Value: v})
		}
		c.Env = append(c.Env, spec.Env...)
		withImage = &c
	}
	env, path = r.environment(pod, withImage)
	dir = spec.WorkingDir
	if dir == "" && known {
		dir = cfg.WorkingDir
	}
	return dedupEnv(env), path, dir
}

// containerProcessEnv is processEnv with spec's image looked up.
func (r *Runtime) containerProcessEnv(pod *v1.Pod, spec *v1.Container) (env []string, path, dir string) {
	spec = r.withBuiltEnv(pod, spec)
	cfg, known := r.imageConfig(spec.Image)
	return r.processEnv(pod, spec, cfg, known)
}

// dedupEnv keeps the last value of each name, at the place of its first:
// a process reading its environment (getenv takes the first) sees what
// the later entry meant to set.
func dedupEnv(env []string) []string {
	last := make(map[string]int, len(env))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	out := make([]string, 0, len(last))
	seen := make(map[string]bool, len(last))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, env[last[k]])
	}
	return out
}

// hostProgramWarning is the warning that the node's program stands in for
// the image's, once the container started with l.
func (r *Runtime) hostProgramWarning(spec *v1.Container, l launch) reasonMessage {
	prog := l.argv[0]
	if l.applet {
		prog = fmt.Sprintf("%s (an applet of %s)", l.argv[1], l.argv[0])
	} else if exe, err := lookPath(prog, l.path, "/"); err == nil && exe != prog {
		prog = fmt.Sprintf("%s (%s)", prog, exe)
	}
	msg := fmt.Sprintf("image %q is not pulled: this node runs its own programs, so the container's %s is the node's", spec.Image, prog)
	if l.fromImage {
		msg += fmt.Sprintf(" (command from the node's image table: %s)", l.imageSource)
	}
	return reasonMessage{ReasonHostProgram, msg}
}
