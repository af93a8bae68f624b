package main

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// redacted replaces a secret-shaped value in what the agent serves.
const redacted = "[redacted]"

// lastAppliedAnnotation holds the whole object as kubectl last applied it,
// env values included.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// secretWords make an annotation key secret-shaped.
var secretWords = []string{"secret", "password", "passwd", "token", "credential", "apikey", "api-key", "private-key", "privatekey"}

// redactPod returns a copy of pod fit to serve: every literal env value of
// every container (init, regular and ephemeral), every HTTP header value
// of its probes and lifecycle hooks (where an Authorization header goes),
// the last-applied-configuration annotation (which embeds the spec) and
// every annotation whose key looks secret (secretWords) are replaced by
// redacted. The status is left out: it is the config source's copy, never
// updated by the agent (the pod's observed status is served beside it).
// envFrom has no literal values (only references), and the names of the
// Secrets and ConfigMaps an env refers to are not secret; both are kept.
// A nil pod gives nil.
func redactPod(pod *v1.Pod) *v1.Pod {
	if pod == nil {
		return nil
	}
	p := pod.DeepCopy()
	p.Status = v1.PodStatus{}
	for k := range p.Annotations {
		if secretAnnotation(k) {
			p.Annotations[k] = redacted
		}
	}
	for i := range p.Spec.InitContainers {
		redactContainer(&p.Spec.InitContainers[i])
	}
	for i := range p.Spec.Containers {
		redactContainer(&p.Spec.Containers[i])
	}
	for i := range p.Spec.EphemeralContainers {
		c := &p.Spec.EphemeralContainers[i].EphemeralContainerCommon
		redactEnv(c.Env)
		for _, pr := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			redactProbe(pr)
		}
		redactLifecycle(c.Lifecycle)
	}
	return p
}

// secretAnnotation reports whether an annotation's value is to be hidden.
func secretAnnotation(key string) bool {
	if key == lastAppliedAnnotation {
		return true
	}
	k := strings.ToLower(key)
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

func redactContainer(c *v1.Container) {
	redactEnv(c.Env)
	for _, pr := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		redactProbe(pr)
	}
	redactLifecycle(c.Lifecycle)
}

func redactEnv(env []v1.EnvVar) {
	for i := range env {
		if env[i].Value != "" {
			env[i].Value = redacted
		}
	}
}

func redactProbe(p *v1.Probe) {
	if p != nil {
		redactHTTPGet(p.HTTPGet)
	}
}

func redactLifecycle(l *v1.Lifecycle) {
	if l == nil {
		return
	}
	for _, h := range []*v1.LifecycleHandler{l.PostStart, l.PreStop} {
		if h != nil {
			redactHTTPGet(h.HTTPGet)
		}
	}
}

func redactHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	for i := range h.HTTPHeaders {
		if h.HTTPHeaders[i].Value != "" {
			h.HTTPHeaders[i].Value = redacted
		}
	}
}
