// Package sourcepods is the one home of the rules for the pods a config
// source sends: which of them may be used (Identified, Valid), the stamp
// that names their source (Stamp), and how a dropped pod is reported
// (Reporter). podconfig.Config applies them when it merges a snapshot, and
// lifecycle.SyncLoop applies them to the updates no Config made (see
// podconfig.PodUpdate.FromConfig): each pod goes through them once, on
// every path, and a dropped pod is reported the same way wherever it is
// dropped.
//
// The check functions are pure: they never modify the pods they are given,
// and they report every pod they drop through the caller's Drop function.
package sourcepods

import (
	"errors"
	"fmt"
	"maps"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/mirror"
)

// ReasonFailedValidation is the reason of the Warning event recorded for a
// dropped pod; podconfig exports it as podconfig.ReasonFailedValidation.
const ReasonFailedValidation = "FailedValidation"

// Drop is told of each pod a check drops: its index in the batch, the pod
// (nil for a nil pod) and why, in a sentence for a person. It is called on
// the caller's goroutine, in batch order.
type Drop func(i int, pod *v1.Pod, reason string)

// Reporter returns the one report of a dropped pod: an error log line at
// level 0 ("Ignoring an unusable pod", the reason as the error, the pod's
// index and keysAndValues as values) and, for a pod that is not nil, a
// ReasonFailedValidation Warning event on it. rec must not be nil (use
// event.OrDiscard).
func Reporter(log logr.Logger, rec event.Recorder, keysAndValues ...any) Drop {
	return func(i int, pod *v1.Pod, reason string) {
		log.Error(errors.New(reason), "Ignoring an unusable pod", append([]any{"index", i}, keysAndValues...)...)
		if pod != nil {
			rec.Eventf(pod, v1.EventTypeWarning, ReasonFailedValidation, "%s", reason)
		}
	}
}

// Identified returns, in order, the pods that can be told apart: not nil
// and with a UID. It reports each other one to drop. The slice is new; the
// pods are shared.
func Identified(pods []*v1.Pod, drop Drop) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	for i, p := range pods {
		if reason := unidentified(i, p); reason != "" {
			drop(i, p, reason)
			continue
		}
		out = append(out, p)
	}
	return out
}

// unidentified says why pod i of a batch cannot be used whatever its
// source, or "" when it can.
func unidentified(i int, p *v1.Pod) string {
	switch {
	case p == nil:
		return fmt.Sprintf("pod %d of the batch is nil", i)
	case p.UID == "":
		return fmt.Sprintf("pod %s has no UID", mirror.PodFullName(p))
	}
	return ""
}

// Valid returns, in order, the pods of one batch from source that may be
// used, and reports each one it drops: a pod Identified drops, a mirror pod
// from a source other than the API server (only the API server holds mirror
// pods; elsewhere the annotation would hide a pod from its workers), and a
// pod whose full name or UID an earlier pod of the batch has. The slice is
// new; the pods are shared.
func Valid(source string, pods []*v1.Pod, drop Drop) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	names := make(map[string]struct{}, len(pods))
	uids := make(map[types.UID]struct{}, len(pods))
	for i, p := range pods {
		if reason := unidentified(i, p); reason != "" {
			drop(i, p, reason)
			continue
		}
		name := mirror.PodFullName(p)
		switch _, dupName := names[name]; {
		case mirror.IsMirrorPod(p) && source != mirror.ApiserverSource:
			drop(i, p, fmt.Sprintf("pod %s from source %q carries the %s annotation, but only the API server source may send mirror pods",
				name, source, mirror.ConfigMirrorAnnotationKey))
			continue
		case dupName:
			drop(i, p, fmt.Sprintf("pod %s (UID %s) from source %q has the same full name as an earlier pod of the source; it is ignored",
				name, p.UID, source))
			continue
		}
		if _, dup := uids[p.UID]; dup {
			drop(i, p, fmt.Sprintf("pod %s from source %q has UID %s, which an earlier pod of the source has; it is ignored",
				name, source, p.UID))
			continue
		}
		names[name] = struct{}{}
		uids[p.UID] = struct{}{}
		out = append(out, p)
	}
	return out
}

// Stamp returns pod with its config source annotation
// (mirror.ConfigSourceAnnotationKey) set to source: pod itself when it
// already says so, otherwise a shallow copy with a new annotation map (the
// caller's pod is never modified). pod must not be nil.
func Stamp(pod *v1.Pod, source string) *v1.Pod {
	if v, ok := pod.Annotations[mirror.ConfigSourceAnnotationKey]; ok && v == source {
		return pod
	}
	cp := *pod
	cp.Annotations = maps.Clone(pod.Annotations)
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[mirror.ConfigSourceAnnotationKey] = source
	return &cp
}
