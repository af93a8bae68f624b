package cri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/podworker"
)

// syncContainers brings the containers of the ready sandbox sandboxID to
// what pod asks: init containers in order, then the regular ones.
func (s *Syncer) syncContainers(ctx context.Context, pod *v1.Pod, status *PodStatus, sandboxID string, sandboxConfig *runtimeapi.PodSandboxConfig, podIPs []string) error {
	initialized := false
	for _, c := range pod.Spec.Containers {
		if status.latest(c.Name, sandboxID) != nil {
			initialized = true // init containers are done once a regular one was created
			break
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := podstatus.IsSidecar(c)
		if initialized && !sidecar {
			continue
		}
		cur := status.latest(c.Name, sandboxID)
		var err error
		switch {
		case cur == nil:
			err = s.startNew(ctx, pod, status, sandboxID, sandboxConfig, c, podIPs)
		case cur.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING:
		case cur.GetState() == runtimeapi.ContainerState_CONTAINER_CREATED:
			err = s.start(ctx, pod, c, cur.GetId(), cur.GetMetadata().GetAttempt(), podIPs)
		case cur.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED && cur.GetExitCode() == 0 && !sidecar:
			continue // done: on to the next one
		default:
			// Failed (or a sidecar exited). A RestartPolicy Never pod
			// never gets here: its phase is Failed and SyncPod stopped.
			err = s.restart(ctx, pod, status, sandboxID, sandboxConfig, c, cur, podIPs)
		}
		if err != nil || !sidecar {
			// An init container is running, or was just (re)started, or
			// failed to: the next ones wait for it.
			return err
		}
	}

	var errs []error
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cur := status.latest(c.Name, sandboxID)
		var err error
		switch {
		case cur == nil:
			err = s.startNew(ctx, pod, status, sandboxID, sandboxConfig, c, podIPs)
		case cur.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING:
		case cur.GetState() == runtimeapi.ContainerState_CONTAINER_CREATED:
			err = s.start(ctx, pod, c, cur.GetId(), cur.GetMetadata().GetAttempt(), podIPs)
		case shouldRestart(pod.Spec.RestartPolicy, cur):
			err = s.restart(ctx, pod, status, sandboxID, sandboxConfig, c, cur, podIPs)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// shouldRestart reports whether the pod's restart policy restarts a regular
// container that is no longer running (podstatus.ShouldRestart); one in an
// unknown state counts as failed.
func shouldRestart(policy v1.RestartPolicy, cur *ContainerStatus) bool {
	code := cur.GetExitCode()
	if cur.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		code = podstatus.ExitCodeUnknown
	}
	return podstatus.ShouldRestart(policy, false, code)
}

// restart replaces cur, an instance of c that is no longer running, with a
// new one, unless c is in its restart back-off. Older dead instances of c
// are removed first; cur is kept (its exit shows as the last state).
func (s *Syncer) restart(ctx context.Context, pod *v1.Pod, status *PodStatus, sandboxID string, sandboxConfig *runtimeapi.PodSandboxConfig, c *v1.Container, cur *ContainerStatus, podIPs []string) error {
	var ranFor time.Duration
	if cur.GetStartedAt() > 0 && cur.GetFinishedAt() > cur.GetStartedAt() {
		ranFor = time.Duration(cur.GetFinishedAt() - cur.GetStartedAt())
	}
	if wait := s.backOff.next(pod.UID, c.Name, s.opts.Clock.Now(), ranFor); wait > 0 {
		// As on a kubelet, the back-off's reason replaces the one the
		// last attempt left (a failed postStart hook) at the next status.
		s.wait(pod, status, c, ReasonCrashLoopBackOff, fmt.Sprintf("back-off %v restarting failed container=%s pod=%s_%s(%s)",
			wait.Round(time.Second), c.Name, pod.Name, pod.Namespace, pod.UID))
		return podworker.RetryAfter(fmt.Errorf("%w %q of pod %s (exit code %d); next restart in %v",
			ErrBackOff, c.Name, podRef(pod), cur.GetExitCode(), wait.Round(time.Millisecond)), wait)
	}
	if cur.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		if err := s.containers.StopContainer(ctx, cur.GetId(), 0); err != nil && !isNotFound(err) {
			return fmt.Errorf("cri: stopping container %q (%s) of pod %s, in an unknown state: %w", c.Name, cur.GetId(), podRef(pod), err)
		}
	}
	for _, old := range status.Containers {
		if old.GetId() == cur.GetId() || old.GetMetadata().GetName() != c.Name || mayRun(old.GetState()) {
			continue
		}
		if err := s.containers.RemoveContainer(ctx, old.GetId()); err != nil && !isNotFound(err) {
			return fmt.Errorf("cri: removing old container %q (%s) of pod %s: %w", c.Name, old.GetId(), podRef(pod), err)
		}
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Restarting container", "container", c.Name, "exitCode", cur.GetExitCode())
	return s.startNew(ctx, pod, status, sandboxID, sandboxConfig, c, podIPs)
}

// startNew creates and starts a new instance of c in the sandbox, whose
// addresses are podIPs. A container whose configuration cannot be built
// (its environment, its mounts) is left waiting (CreateContainerConfigError,
// a Failed event) and the error says why.
func (s *Syncer) startNew(ctx context.Context, pod *v1.Pod, status *PodStatus, sandboxID string, sandboxConfig *runtimeapi.PodSandboxConfig, c *v1.Container, podIPs []string) error {
	if err := s.checkImage(ctx, pod, c); err != nil {
		return err
	}
	attempt := status.nextAttempt(c.Name)
	config, err := s.containerConfig(ctx, pod, c, attempt, podIPs)
	if err != nil {
		if we := (*waitingError)(nil); errors.As(err, &we) {
			s.wait(pod, status, c, we.reason, we.message)
		}
		return fmt.Errorf("cri: pod %s: %w", podRef(pod), err)
	}
	id, err := s.containers.CreateContainer(ctx, sandboxID, config, sandboxConfig)
	if err != nil {
		return fmt.Errorf("cri: creating container %q of pod %s from image %q: %w", c.Name, podRef(pod), c.Image, err)
	}
	s.waiting.clear(pod.UID, c.Name)
	return s.start(ctx, pod, c, id, attempt, podIPs)
}

// start starts created container id, an instance (CRI attempt attempt)
// of c, and runs its postStart hook.
func (s *Syncer) start(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, attempt uint32, podIPs []string) error {
	if err := s.containers.StartContainer(ctx, id); err != nil {
		return fmt.Errorf("cri: starting container %q (%s) of pod %s: %w", c.Name, id, podRef(pod), err)
	}
	logr.FromContextOrDiscard(ctx).V(4).Info("Started container", "container", c.Name, "containerID", id)
	return s.postStart(ctx, pod, c, id, attempt, podIPs)
}

// checkImage fails with ErrImageNotPresent when Options.Images says c's
// image is not on the node.
func (s *Syncer) checkImage(ctx context.Context, pod *v1.Pod, c *v1.Container) error {
	if c.Image == "" {
		return fmt.Errorf("%w: container %q of pod %s has no image", ErrUnsupported, c.Name, podRef(pod))
	}
	if s.opts.Images == nil {
		return nil
	}
	resp, err := s.opts.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: c.Image}, false)
	if err != nil {
		return fmt.Errorf("cri: checking image %q of container %q of pod %s: %w", c.Image, c.Name, podRef(pod), err)
	}
	if resp.GetImage() == nil {
		return fmt.Errorf("%w: image %q of container %q of pod %s is not on the node, and this syncer never pulls images",
			ErrImageNotPresent, c.Image, c.Name, podRef(pod))
	}
	return nil
}

// sandboxConfig is the CRI configuration of pod's sandbox.
func (s *Syncer) sandboxConfig(pod *v1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	config := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Labels:      podLabels(pod.Name, pod.Namespace, pod.UID, pod.Labels),
		Annotations: maps.Clone(pod.Annotations),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: namespaceOptions(pod),
			},
		},
	}
	if !pod.Spec.HostNetwork {
		// A host-network sandbox shares the node's UTS namespace: the
		// runtime refuses a hostname for it.
		config.Hostname = pod.Name
		if pod.Spec.Hostname != "" {
			config.Hostname = pod.Spec.Hostname
		}
	}
	if s.opts.LogDirectory != "" {
		config.LogDirectory = podLogDirectory(s.opts.LogDirectory, pod.Namespace, pod.Name, pod.UID)
	}
	if dns := pod.Spec.DNSConfig; dns != nil {
		config.DnsConfig = &runtimeapi.DNSConfig{Servers: dns.Nameservers, Searches: dns.Searches}
		for _, o := range dns.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			config.DnsConfig.Options = append(config.DnsConfig.Options, opt)
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			config.PortMappings = append(config.PortMappings, &runtimeapi.PortMapping{
				Protocol:      protocolOf(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	return config
}

// containerConfig is the CRI configuration of instance attempt of c, in
// a sandbox whose addresses are podIPs: its environment as the kubelet
// builds it (Options.Env), its command and args with $(VAR) expanded, and
// its volume mounts as CRI Mounts. An error that is the container's to
// wait out (a missing secret key, a volume not ready) is a waitingError.
func (s *Syncer) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, attempt uint32, podIPs []string) (*runtimeapi.ContainerConfig, error) {
	prim := s.features()
	env, err := prim.env.Build(ctx, pod, c, podenv.Inputs{PodIPs: podIPs, HostIPs: s.opts.NodeIPs})
	if err != nil {
		return nil, asWaiting(c.Name, err)
	}
	command, args, err := prim.env.ExpandCommandAndArgs(c, env)
	if err != nil {
		return nil, asWaiting(c.Name, err)
	}
	mounts, err := s.mounts(pod, c, env)
	if err != nil {
		return nil, err
	}
	envs := make([]*runtimeapi.KeyValue, 0, len(env))
	for _, e := range env {
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	labels := podLabels(pod.Name, pod.Namespace, pod.UID, nil)
	labels[LabelContainerName] = c.Name
	config := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:      &runtimeapi.ImageSpec{Image: c.Image},
		Command:    command,
		Args:       args,
		WorkingDir: c.WorkingDir,
		Envs:       envs,
		Mounts:     mounts,
		Labels:     labels,
		Stdin:      c.Stdin,
		StdinOnce:  c.StdinOnce,
		Tty:        c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: containerSecurity(pod, c),
		},
	}
	if s.opts.LogDirectory != "" {
		config.LogPath = filepath.Join(c.Name, fmt.Sprintf("%d.log", attempt))
	}
	return config, nil
}

// containerSecurity is the Linux security context of container c.
func containerSecurity(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = psc.SupplementalGroups
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
		}
		if csc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
		}
		if csc.Privileged != nil {
			sc.Privileged = *csc.Privileged
		}
		if csc.ReadOnlyRootFilesystem != nil {
			sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
		}
	}
	return sc
}

// namespaceOptions are the Linux namespaces of the pod's sandbox and
// containers: the node's network, PID and IPC namespaces when the pod asks
// for them; otherwise the pod's network and IPC namespaces, and a PID
// namespace per container unless the pod shares one.
func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

func protocolOf(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// podLogDirectory is the log directory of a pod under root.
func podLogDirectory(root, namespace, name string, uid types.UID) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", namespace, name, uid))
}
