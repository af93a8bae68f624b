package main

import (
	"strings"
	"unicode"

	v1 "k8s.io/api/core/v1"
)

// redacted replaces a secret-shaped value in what the agent serves.
const redacted = "[redacted]"

// lastAppliedAnnotation holds the whole object as kubectl last applied it,
// env values included.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// secretWords make a name secret-shaped (secretName).
var secretWords = []string{"secret", "password", "passwd", "token", "credential", "apikey", "privatekey"}

// redactPod returns a copy of pod fit to serve. Replaced by redacted are:
//   - every literal env value of every container (init, regular and
//     ephemeral);
//   - in the command and args of every container and the exec commands of
//     its probes and lifecycle hooks, the value of each secret-shaped
//     setting: in every whitespace-separated word of the form NAME=VALUE
//     (--db-password=x, PGPASSWORD=x, also inside a shell script) whose
//     NAME is secret-shaped, VALUE; and after a bare flag whose name is
//     secret-shaped (--password, -token), the word that follows it, in the
//     same argument or the next;
//   - every HTTP header value of the probes and lifecycle hooks (where an
//     Authorization header goes);
//   - the last-applied-configuration annotation (which embeds the spec)
//     and every annotation whose key is secret-shaped.
//
// A name is secret-shaped when, lowercased and without '-', '_' and '.',
// it contains one of secretWords. Secrets in any other shape (a password
// after -p, a URL's credentials, a quoted value with spaces past its
// first word) are not recognized. The status is left out: it is the
// config source's copy, never updated by the agent (the pod's observed
// status is served beside it). envFrom has no literal values (only
// references), and the names of the Secrets and ConfigMaps an env refers
// to are not secret; both are kept. A nil pod gives nil.
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
		redactArgs(c.Command, c.Args)
		for _, pr := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			redactProbe(pr)
		}
		redactLifecycle(c.Lifecycle)
	}
	return p
}

// secretAnnotation reports whether an annotation's value is to be hidden.
func secretAnnotation(key string) bool {
	return key == lastAppliedAnnotation || secretName(key)
}

// secretName reports whether a name (an annotation key, a flag, a
// variable) is secret-shaped: lowercased and without '-', '_' and '.', it
// contains one of secretWords.
func secretName(name string) bool {
	n := strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', '.':
			return -1
		}
		return unicode.ToLower(r)
	}, name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func redactContainer(c *v1.Container) {
	redactEnv(c.Env)
	redactArgs(c.Command, c.Args)
	for _, pr := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		redactProbe(pr)
	}
	redactLifecycle(c.Lifecycle)
}

// redactArgs redacts, in place, the values of the secret-shaped settings
// of a command line given in parts (command, then args): see redactPod.
func redactArgs(parts ...[]string) {
	valueNext := false
	for _, args := range parts {
		for i := range args {
			args[i], valueNext = redactWords(args[i], valueNext)
		}
	}
}

// redactWords redacts the secret-shaped values among the words of arg.
// valueNext says the word before arg was a bare secret-shaped flag, so
// arg's first word is its value; the result says the same of arg's last
// word. An argument of no word (empty) is taken as the flag's value.
func redactWords(arg string, valueNext bool) (string, bool) {
	if strings.TrimSpace(arg) == "" {
		return arg, false
	}
	var b strings.Builder
	for rest := arg; rest != ""; {
		i := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsSpace(r) })
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		j := strings.IndexFunc(rest, unicode.IsSpace)
		if j < 0 {
			j = len(rest)
		}
		word := rest[:j]
		rest = rest[j:]
		if valueNext {
			b.WriteString(redacted)
			valueNext = false
			continue
		}
		name, value, hasValue := strings.Cut(word, "=")
		switch {
		case hasValue && value != "" && secretName(name):
			b.WriteString(name + "=" + redacted)
		case !hasValue && strings.HasPrefix(word, "-") && secretName(word):
			b.WriteString(word)
			valueNext = true
		default:
			b.WriteString(word)
		}
	}
	return b.String(), valueNext
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
		redactExec(p.Exec)
	}
}

func redactExec(e *v1.ExecAction) {
	if e != nil {
		redactArgs(e.Command)
	}
}

func redactLifecycle(l *v1.Lifecycle) {
	if l == nil {
		return
	}
	for _, h := range []*v1.LifecycleHandler{l.PostStart, l.PreStop} {
		if h != nil {
			redactHTTPGet(h.HTTPGet)
			redactExec(h.Exec)
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
