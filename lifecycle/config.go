package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/mirror"
)

// DefaultConfigBuffer is the capacity of a Config's update channel when
// ConfigOptions.Buffer is 0, the kubelet's.
const DefaultConfigBuffer = 50

// ConfigOptions configure a Config. The zero value is valid.
type ConfigOptions struct {
	// Recorder receives a ReasonFailedValidation event for each pod a
	// snapshot carries that cannot be used. Defaults to none (events are
	// dropped; they are still logged).
	Recorder Recorder
	// Logger receives the Config's logs: rejected pods at level 0, the
	// operations of each merge at V(4). Defaults to the zero Logger, which
	// discards.
	Logger logr.Logger
	// Clock stamps the kubernetes.io/config.seen annotation of pods seen
	// for the first time. Defaults to the real clock.
	Clock clock.PassiveClock
	// Buffer is the capacity of the Updates channel. Defaults to
	// DefaultConfigBuffer; negative is an error.
	Buffer int
}

// Config merges the full snapshots of any number of config sources into a
// stream of PodUpdates: per source it remembers the pods it last delivered
// and turns each new snapshot into the operations that lead there (ADD,
// UPDATE, DELETE, RECONCILE, REMOVE). Feed its Updates channel to
// Handler.Run.
//
// Per source, and for each pod of a snapshot:
//   - the pod is deep-copied (the caller's pods are never modified or kept)
//     and stamped with the kubernetes.io/config.source annotation naming the
//     source, before any comparison, whatever the pod carried;
//   - a pod whose full name or UID an earlier pod of the same snapshot
//     already has, a pod without a UID, and a mirror pod from a source other
//     than the API server are dropped with a ReasonFailedValidation event;
//   - a UID the source did not have is an ADD, stamped with
//     kubernetes.io/config.seen;
//   - a known UID whose spec, labels, deletion timestamp, deletion grace
//     period or non-local annotations changed is a DELETE when it now has a
//     deletion timestamp and an UPDATE otherwise;
//   - a known UID of which only the status changed is a RECONCILE;
//   - a UID missing from the snapshot is a REMOVE.
//
// The updates of one snapshot are delivered in the order REMOVE, ADD,
// UPDATE, DELETE, RECONCILE, each only when it has pods, except that the
// first snapshot of a source always delivers at least an (empty) ADD, so the
// sync loop learns the source is ready.
//
// Create it with NewConfig. Its methods are safe for concurrent use; the
// updates of concurrent SetPods calls are never interleaved.
type Config struct {
	recorder Recorder
	log      logr.Logger
	clock    clock.PassiveClock
	updates  chan PodUpdate

	// sendMu serializes SetPods, so each snapshot's updates go out together
	// and in order.
	sendMu sync.Mutex

	// mu guards pods and seen.
	mu sync.Mutex
	// pods holds, per source, the pods as last delivered, by UID. The
	// objects are the Config's own: only deep copies leave it.
	pods map[string]map[types.UID]*v1.Pod
	seen map[string]bool
}

// NewConfig returns a Config with no sources. It starts nothing. It returns
// an error for a negative buffer.
func NewConfig(opts ConfigOptions) (*Config, error) {
	if opts.Buffer < 0 {
		return nil, fmt.Errorf("lifecycle: ConfigOptions.Buffer is %d; want 0 (default) or more", opts.Buffer)
	}
	if opts.Buffer == 0 {
		opts.Buffer = DefaultConfigBuffer
	}
	if opts.Recorder == nil {
		opts.Recorder = nopRecorder{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Config{
		recorder: opts.Recorder,
		log:      opts.Logger,
		clock:    opts.Clock,
		updates:  make(chan PodUpdate, opts.Buffer),
		pods:     map[string]map[types.UID]*v1.Pod{},
		seen:     map[string]bool{},
	}, nil
}

// Updates returns the channel SetPods delivers to. It is never closed. The
// pods in the updates are the receiver's (see PodUpdate).
func (c *Config) Updates() <-chan PodUpdate { return c.updates }

// SetPods replaces everything source had with pods (a full snapshot;
// empty means the source has no pods) and sends the resulting updates on
// the Updates channel, blocking while it is full. Sources call it from any
// goroutine; the pods stay the caller's and are not modified.
//
// It returns an error for an empty source name (nothing is changed), and
// ctx.Err() when ctx ends before every update was delivered: the updates
// not yet sent are then lost, so give SetPods a context that ends only when
// the sync loop stops reading too.
func (c *Config) SetPods(ctx context.Context, source string, pods []*v1.Pod) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	ups, err := c.Merge(source, pods)
	if err != nil {
		return err
	}
	for _, u := range ups {
		select {
		case c.updates <- u:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Merge is SetPods without the channel: it records the snapshot and returns
// the updates, in delivery order, for the caller to hand to the sync loop
// (Handler.Dispatch) in that order. Use either SetPods or Merge for a given
// Config, not both at once, or updates may reach the loop out of order.
// The returned pods are new deep copies and belong to the caller.
func (c *Config) Merge(source string, pods []*v1.Pod) ([]PodUpdate, error) {
	if source == "" {
		return nil, errors.New("lifecycle: Config: a snapshot needs a source name, got \"\"")
	}
	c.mu.Lock()
	defer c.mu.Unlock()

	firstSet := !c.seen[source]
	c.seen[source] = true
	old := c.pods[source]
	next := make(map[types.UID]*v1.Pod, len(pods))
	var adds, updates, deletes, reconciles, removes []*v1.Pod

	now := c.clock.Now().Format(time.RFC3339Nano)
	for _, p := range validPods(source, pods, c.recorder, c.log) {
		ref := p.DeepCopy()
		ref.Annotations = maps.Clone(ref.Annotations)
		if ref.Annotations == nil {
			ref.Annotations = map[string]string{}
		}
		ref.Annotations[mirror.ConfigSourceAnnotationKey] = source
		if existing, ok := old[ref.UID]; ok {
			next[ref.UID] = existing
			switch mergeInto(existing, ref) {
			case UPDATE:
				updates = append(updates, existing)
			case DELETE:
				deletes = append(deletes, existing)
			case RECONCILE:
				reconciles = append(reconciles, existing)
			}
			continue
		}
		ref.Annotations[mirror.ConfigFirstSeenAnnotationKey] = now
		next[ref.UID] = ref
		adds = append(adds, ref)
	}
	for uid, p := range old {
		if _, ok := next[uid]; !ok {
			removes = append(removes, p)
		}
	}
	slices.SortFunc(removes, func(a, b *v1.Pod) int { return strings.Compare(mirror.PodFullName(a), mirror.PodFullName(b)) })
	c.pods[source] = next

	var out []PodUpdate
	emit := func(op PodOperation, list []*v1.Pod) {
		if len(list) > 0 {
			out = append(out, PodUpdate{Op: op, Pods: deepCopyPods(list), Source: source})
		}
	}
	emit(REMOVE, removes)
	emit(ADD, adds)
	emit(UPDATE, updates)
	emit(DELETE, deletes)
	if firstSet && len(adds) == 0 && len(updates) == 0 && len(deletes) == 0 {
		out = append(out, PodUpdate{Op: ADD, Pods: []*v1.Pod{}, Source: source})
	}
	emit(RECONCILE, reconciles)
	if c.log.V(4).Enabled() {
		for _, u := range out {
			c.log.V(4).Info("Config update", "source", source, "op", u.Op.String(), "pods", len(u.Pods))
		}
	}
	return out, nil
}

func deepCopyPods(pods []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
	}
	return out
}

// localAnnotations are set by the node agent, not by the source, and are
// ignored when comparing a pod with its previous version.
var localAnnotations = []string{
	mirror.ConfigSourceAnnotationKey,
	mirror.ConfigMirrorAnnotationKey,
	mirror.ConfigFirstSeenAnnotationKey,
}

func sameNonLocalAnnotations(a, b map[string]string) bool {
	count := func(m map[string]string) int {
		n := len(m)
		for _, k := range localAnnotations {
			if _, ok := m[k]; ok {
				n--
			}
		}
		return n
	}
	if count(a) != count(b) {
		return false
	}
	for k, v := range b {
		if slices.Contains(localAnnotations, k) {
			continue
		}
		if av, ok := a[k]; !ok || av != v {
			return false
		}
	}
	return true
}

// noChange is mergeInto's answer for a pod that did not change.
const noChange PodOperation = -1

// mergeInto updates existing (the Config's stored pod) from ref (the new
// version, stamped with the same source) and says what the change is:
// UPDATE, DELETE, RECONCILE or noChange.
func mergeInto(existing, ref *v1.Pod) PodOperation {
	semantic := equality.Semantic
	if semantic.DeepEqual(existing.Spec, ref.Spec) &&
		semantic.DeepEqual(existing.Labels, ref.Labels) &&
		semantic.DeepEqual(existing.DeletionTimestamp, ref.DeletionTimestamp) &&
		semantic.DeepEqual(existing.DeletionGracePeriodSeconds, ref.DeletionGracePeriodSeconds) &&
		sameNonLocalAnnotations(existing.Annotations, ref.Annotations) {
		if semantic.DeepEqual(existing.Status, ref.Status) {
			return noChange
		}
		existing.Status = ref.Status
		return RECONCILE
	}
	existing.Spec = ref.Spec
	existing.Labels = ref.Labels
	existing.DeletionTimestamp = ref.DeletionTimestamp
	existing.DeletionGracePeriodSeconds = ref.DeletionGracePeriodSeconds
	existing.Generation = ref.Generation
	existing.Status = ref.Status
	annotations := maps.Clone(ref.Annotations)
	for _, k := range localAnnotations {
		if v, ok := existing.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	existing.Annotations = annotations
	if ref.DeletionTimestamp != nil {
		return DELETE
	}
	return UPDATE
}

// validPods returns the pods of one batch from source that may be used, in
// order, and reports each one it drops: nil pods, pods without a UID, a
// mirror pod from a source other than the API server (only the API server
// holds mirror pods; elsewhere the annotation would hide a pod from its
// workers), and a pod whose UID or full name an earlier pod of the batch
// has. The pods are not modified.
func validPods(source string, pods []*v1.Pod, rec Recorder, log logr.Logger) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	names := make(map[string]struct{}, len(pods))
	uids := make(map[types.UID]struct{}, len(pods))
	drop := func(i int, pod *v1.Pod, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		log.Info("Ignoring a pod from a config source", "source", source, "index", i, "reason", msg)
		if pod != nil {
			rec.Eventf(pod, v1.EventTypeWarning, ReasonFailedValidation, "%s", msg)
		}
	}
	for i, p := range pods {
		switch {
		case p == nil:
			drop(i, nil, "source %q sent a nil pod at index %d", source, i)
			continue
		case p.UID == "":
			drop(i, p, "pod %s from source %q has no UID", mirror.PodFullName(p), source)
			continue
		case mirror.IsMirrorPod(p) && source != mirror.ApiserverSource:
			drop(i, p, "pod %s from source %q carries the %s annotation, but only the API server source may send mirror pods",
				mirror.PodFullName(p), source, mirror.ConfigMirrorAnnotationKey)
			continue
		}
		name := mirror.PodFullName(p)
		if _, dup := names[name]; dup {
			drop(i, p, "pod %s (UID %s) from source %q has the same full name as an earlier pod of the source; it is ignored",
				name, p.UID, source)
			continue
		}
		if _, dup := uids[p.UID]; dup {
			drop(i, p, "pod %s from source %q has UID %s, which an earlier pod of the source has; it is ignored",
				name, source, p.UID)
			continue
		}
		names[name] = struct{}{}
		uids[p.UID] = struct{}{}
		out = append(out, p)
	}
	return out
}

// stampSource returns pod with its config source annotation set to source:
// pod itself when it already says so, otherwise a shallow copy with a new
// annotation map (the caller's pod is never modified).
func stampSource(pod *v1.Pod, source string) *v1.Pod {
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
