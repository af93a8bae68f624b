package podconfig

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

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/internal/sourcepods"
	"github.com/podkit/podkit/mirror"
)

// DefaultBuffer is the capacity of a Config's update channel when
// Options.Buffer is 0, the kubelet's.
const DefaultBuffer = 50

// Options configure a Config. The zero value is valid.
type Options struct {
	// Recorder receives a ReasonFailedValidation Warning event for each pod
	// a snapshot carries that cannot be used. It is called on the goroutine
	// of the SetPods or Merge call. Defaults to event.Discard (the pods are
	// still logged).
	Recorder event.Recorder
	// Logger receives the Config's logs: each pod it drops as an error at
	// level 0, the operations of each merge at V(4). Defaults to the zero
	// Logger, which discards.
	Logger logr.Logger
	// Clock stamps the kubernetes.io/config.seen annotation of pods seen
	// for the first time. Defaults to the real clock.
	Clock clock.PassiveClock
	// Buffer is the capacity of the Updates channel. Defaults to
	// DefaultBuffer; negative is an error.
	Buffer int
}

// Config merges the full snapshots of any number of config sources into a
// stream of PodUpdates: per source it remembers the pods it last delivered
// and turns each new snapshot into the operations that lead there (OpAdd,
// OpUpdate, OpDelete, OpReconcile, OpRemove). Feed its Updates channel to
// lifecycle.SyncLoop.Run.
//
// Per source, and for each pod of a snapshot:
//   - a pod whose full name or UID an earlier pod of the same snapshot
//     already has, a pod without a UID, and a mirror pod from a source other
//     than the API server are dropped, each logged as an error and recorded
//     as a ReasonFailedValidation event, as lifecycle.SyncLoop reports a pod
//     it drops (one rule, internal/sourcepods);
//   - every other pod is deep-copied (the caller's pods are never modified
//     or kept) and stamped with the kubernetes.io/config.source annotation
//     naming the source, before any comparison, whatever the pod carried;
//   - a UID the source did not have is an OpAdd, stamped with
//     kubernetes.io/config.seen;
//   - a known UID whose spec, labels, deletion timestamp, deletion grace
//     period or non-local annotations changed is an OpDelete when it now has
//     a deletion timestamp and an OpUpdate otherwise;
//   - a known UID of which only the status changed is an OpReconcile;
//   - a UID missing from the snapshot is an OpRemove.
//
// The updates of one snapshot are delivered in the order OpRemove, OpAdd,
// OpUpdate, OpDelete, OpReconcile, each only when it has pods, except that
// the first snapshot of a source always delivers at least an (empty) OpAdd,
// so the sync loop learns the source is ready.
//
// Create it with New. Its methods are safe for concurrent use; the
// updates of concurrent SetPods calls are never interleaved.
type Config struct {
	recorder event.Recorder
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

// New returns a Config with no sources. It starts nothing. It returns an
// error, prefixed "podconfig: ", for a negative buffer.
func New(opts Options) (*Config, error) {
	if opts.Buffer < 0 {
		return nil, fmt.Errorf("podconfig: Options.Buffer is %d; want 0 (default) or more", opts.Buffer)
	}
	if opts.Buffer == 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Config{
		recorder: event.OrDiscard(opts.Recorder),
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
// (lifecycle.SyncLoop.Dispatch) in that order. Use either SetPods or Merge
// for a given Config, not both at once, or updates may reach the loop out
// of order.
// The returned pods are new deep copies and belong to the caller.
func (c *Config) Merge(source string, pods []*v1.Pod) ([]PodUpdate, error) {
	if source == "" {
		return nil, errors.New("podconfig: Config: a snapshot needs a source name, got \"\"")
	}
	c.mu.Lock()
	defer c.mu.Unlock()

	firstSet := !c.seen[source]
	c.seen[source] = true
	old := c.pods[source]
	next := make(map[types.UID]*v1.Pod, len(pods))
	var adds, updates, deletes, reconciles, removes []*v1.Pod

	now := c.clock.Now().Format(time.RFC3339Nano)
	drop := sourcepods.Reporter(c.log, c.recorder, "source", source)
	for _, p := range sourcepods.Valid(source, pods, drop) {
		ref := sourcepods.Stamp(p, source).DeepCopy()
		if existing, ok := old[ref.UID]; ok {
			next[ref.UID] = existing
			switch mergeInto(existing, ref) {
			case OpUpdate:
				updates = append(updates, existing)
			case OpDelete:
				deletes = append(deletes, existing)
			case OpReconcile:
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
			out = append(out, PodUpdate{Op: op, Pods: deepCopyPods(list), Source: source, fromConfig: true})
		}
	}
	emit(OpRemove, removes)
	emit(OpAdd, adds)
	emit(OpUpdate, updates)
	emit(OpDelete, deletes)
	if firstSet && len(adds) == 0 && len(updates) == 0 && len(deletes) == 0 {
		out = append(out, PodUpdate{Op: OpAdd, Pods: []*v1.Pod{}, Source: source, fromConfig: true})
	}
	emit(OpReconcile, reconciles)
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
// OpUpdate, OpDelete, OpReconcile or noChange.
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
		return OpReconcile
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
		return OpDelete
	}
	return OpUpdate
}
