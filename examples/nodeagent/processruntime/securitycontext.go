package processruntime

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
	"github.com/podkit/podkit/mirror"
)

// This file turns a container's securityContext (and its pod's) into what
// its process runs with in the sandbox: the pod's and the container's
// settings merged as the kubelet merges them (the container's win), and
// the image's user where none is set.

// ImageUser is the user an image's configuration runs its command as
// (its USER), for containers whose securityContext sets no runAsUser.
type ImageUser struct {
	// UID is the user's ID, and GID its group's; inside the pod.
	UID, GID int64
	// Name is set instead when the image names its user (USER nginx)
	// and the ID is not known: runAsNonRoot cannot be checked then, and
	// such a container waits, as on a kubelet.
	Name string
}

// ImageUsers tells the runtime which user an image runs as. The process
// runtime reads no image, so without one (or the user of the image's
// configuration, ImageConfigs) every container without runAsUser runs as
// root inside its pod (an unprivileged host ID, the pod's user
// namespace's root), as busybox-like images do.
//
// ImageUser is called from SyncPod, for each container start; it must
// not block.
type ImageUsers interface {
	ImageUser(image string) (u ImageUser, ok bool)
}

// ImageUsersFunc adapts a function to ImageUsers.
type ImageUsersFunc func(image string) (ImageUser, bool)

// ImageUser calls f.
func (f ImageUsersFunc) ImageUser(image string) (ImageUser, bool) { return f(image) }

var _ ImageUsers = ImageUsersFunc(nil)

// ReasonCreateContainerConfigError is the waiting reason of a container
// whose configuration cannot be applied (runAsNonRoot and a root user),
// as the kubelet names it. The container is retried at each SyncPod.
const ReasonCreateContainerConfigError = "CreateContainerConfigError"

// security is the effective security settings of a container.
type security struct {
	runAsUser, runAsGroup *int64
	runAsNonRoot          bool
	supplementalGroups    []int64
	fsGroup               *int64
	privileged            bool
	readOnlyRoot          bool
	noNewPrivileges       bool
	add, drop             []v1.Capability
	seccomp               *v1.SeccompProfile
	unmaskedProc          bool
}

// effectiveSecurity merges the pod's securityContext and the container's.
func effectiveSecurity(pod *v1.Pod, c *v1.Container) security {
	var s security
	if psc := pod.Spec.SecurityContext; psc != nil {
		s.runAsUser, s.runAsGroup = psc.RunAsUser, psc.RunAsGroup
		s.runAsNonRoot = psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
		s.supplementalGroups, s.fsGroup = psc.SupplementalGroups, psc.FSGroup
		s.seccomp = psc.SeccompProfile
	}
	csc := c.SecurityContext
	if csc == nil {
		return s
	}
	if csc.RunAsUser != nil {
		s.runAsUser = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		s.runAsGroup = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		s.runAsNonRoot = *csc.RunAsNonRoot
	}
	if csc.SeccompProfile != nil {
		s.seccomp = csc.SeccompProfile
	}
	s.privileged = csc.Privileged != nil && *csc.Privileged
	s.readOnlyRoot = csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem
	s.noNewPrivileges = csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation
	if csc.Capabilities != nil {
		s.add, s.drop = csc.Capabilities.Add, csc.Capabilities.Drop
	}
	s.unmaskedProc = csc.ProcMount != nil && *csc.ProcMount == v1.UnmaskedProcMount
	return s
}

// capabilities is the set a container keeps: all of them when
// privileged, else the default set without what it drops ("ALL": every
// one), with what it adds. Names are checked by ValidatePod.
func (s security) capabilities() sandbox.CapabilitySet {
	if s.privileged {
		return sandbox.AllCapabilities
	}
	set := sandbox.DefaultCapabilities
	for _, d := range s.drop {
		if isAll(d) {
			set = 0
			continue
		}
		c, _ := sandbox.Capability(string(d))
		set &^= c
	}
	for _, a := range s.add {
		if isAll(a) {
			set = sandbox.AllCapabilities
			continue
		}
		c, _ := sandbox.Capability(string(a))
		set |= c
	}
	return set
}

func isAll(c v1.Capability) bool { return c == "ALL" || c == "all" }

// identity resolves the user, group and groups a container runs as,
// inside the pod, and checks runAsNonRoot against them as the kubelet
// does. A non-nil waiting is why the container cannot start: its reason
// and message.
func (r *Runtime) identity(pod *v1.Pod, c *v1.Container, s security) (uid, gid uint32, groups []uint32, waiting *reasonMessage) {
	user, known := r.imageUser(c.Image)
	u, g := int64(0), int64(0)
	if known && user.Name == "" {
		u, g = user.UID, user.GID
	}
	if s.runAsUser != nil {
		u = *s.runAsUser
	}
	if s.runAsGroup != nil {
		g = *s.runAsGroup
	}
	if s.runAsNonRoot {
		who := fmt.Sprintf("(pod: %q, container: %s)", formatPod(pod), c.Name)
		switch {
		case s.runAsUser != nil && *s.runAsUser == 0:
			return 0, 0, nil, &reasonMessage{ReasonCreateContainerConfigError, "container's runAsUser breaks non-root policy " + who}
		case s.runAsUser == nil && known && user.Name != "":
			return 0, 0, nil, &reasonMessage{ReasonCreateContainerConfigError, fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root %s", user.Name, who)}
		case u == 0:
			return 0, 0, nil, &reasonMessage{ReasonCreateContainerConfigError, "container has runAsNonRoot and image will run as root " + who}
		}
	}
	for _, sg := range s.supplementalGroups {
		groups = append(groups, uint32(sg))
	}
	if s.fsGroup != nil && !slices.Contains(groups, uint32(*s.fsGroup)) {
		groups = append(groups, uint32(*s.fsGroup))
	}
	return uint32(u), uint32(g), groups, nil
}

// reasonMessage is a reason and its message: why a container waits
// instead of starting, or a warning.
type reasonMessage struct {
	Reason, Message string
}

// formatPod names a pod as the kubelet's messages do: name_namespace(uid).
func formatPod(pod *v1.Pod) string {
	return fmt.Sprintf("%s(%s)", mirror.PodFullName(pod), pod.UID)
}
