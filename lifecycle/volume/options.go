package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/podworker"
)

// ContentRemovalChecker is what the manager asks the engine's window about
// a pod, by UID, and all it knows of the pod's state: whether the pod's
// content (its volumes) may be removed now, and whether its containers may
// still run (and so read its volumes, which are kept up to date only
// then). *podworker.PodWorkers[T] satisfies it. Both are called from
// SetUp's, TearDown's and Run's goroutines.
type ContentRemovalChecker interface {
	ShouldPodContentBeRemoved(uid types.UID) bool
	CouldHaveRunningContainers(uid types.UID) bool
}

var _ ContentRemovalChecker = (*podworker.PodWorkers[struct{}])(nil)

// Defaults of Options.
const (
	// DefaultRefreshInterval is how often Run refreshes every volume from
	// its sources, as often as the kubelet syncs each pod (its volumes
	// follow their sources at each sync).
	DefaultRefreshInterval = time.Minute
	// DefaultMaxVolumeBytes bounds the files of one configMap, secret,
	// downwardAPI or projected volume together: eight objects of the
	// API's largest.
	DefaultMaxVolumeBytes = 8 << 20
	// DefaultMaxVolumeFiles bounds the files of one such volume.
	DefaultMaxVolumeFiles = 4096
	// DefaultMaxUsageEntries bounds the entries Run walks to measure one
	// emptyDir with a sizeLimit; a volume with more is over its limit.
	DefaultMaxUsageEntries = 1_000_000
)

// Options configure a Manager. The zero value is valid.
type Options struct {
	// Tokens requests the service-account tokens of serviceAccountToken
	// projections. Nil: such a projection fails its volume's setup,
	// saying so.
	Tokens TokenRequester
	// Recorder receives the manager's events (FailedMount, ...; see the
	// Reason constants), on the pod. Defaults to event.Discard.
	Recorder event.Recorder
	// Logger receives the manager's logs. Defaults to discarding.
	Logger logr.Logger
	// Clock drives Run's refreshes and the tokens' lifetimes. Defaults to
	// the real clock.
	Clock clock.WithTicker
	// MapIDs maps a pod's ids to the host's, for the owners of its volume
	// files. Nil: the identity (files belong to the host's root, or
	// fsGroup, ...). A runtime running pods in user namespaces gives the
	// pod's mapping; an agent that is not root maps root to itself.
	MapIDs IDMapper
	// NodeAllocatable returns the node's allocatable resources: the
	// default of a limit a downwardAPI resourceFieldRef reads, and of a
	// memory emptyDir's size. Nil: such limits read as 0, and a memory
	// emptyDir is as large as its sizeLimit or the pod's memory limit,
	// else the system's default.
	NodeAllocatable func() v1.ResourceList
	// Tmpfs mounts memory-backed volumes (emptyDir medium Memory, secret
	// and projected). Defaults to LinuxTmpfs.
	Tmpfs Tmpfs
	// Evict is called when an emptyDir on disk holds more than its
	// sizeLimit (as Run measures it, each RefreshInterval), once per
	// volume until it is back under its limit, with the kubelet's
	// eviction message; the agent evicts the pod (the kubelet's eviction
	// manager does). It is called from Run's goroutine and must not
	// block. Nil: the limit is reported (event SizeLimitExceeded), not
	// enforced.
	Evict func(uid types.UID, message string)
	// RequestSync asks the engine for a sync of a pod (the agent
	// assembly's RequestSync, the engine's Resync): Run calls it, from its
	// goroutine, when a refresh made ready the last volume of a pod whose
	// SetUp had failed (a config map created meanwhile, say), so its
	// containers start now rather than at the engine's next retry. It must
	// not block. Nil: the engine's retry starts them.
	RequestSync func(uid types.UID)
	// RefreshInterval is how often Run brings every volume of the pods
	// that may still run up to date with its sources, tears down the
	// volumes of pods whose content may be removed, and measures
	// emptyDirs with a sizeLimit. Tokens are refreshed when due, between
	// refreshes too. Defaults to DefaultRefreshInterval.
	RefreshInterval time.Duration
	// MaxVolumeBytes and MaxVolumeFiles bound the files of one volume
	// the manager writes (configMap, secret, downwardAPI, projected). A
	// breach fails the volume's setup. Default to DefaultMaxVolumeBytes
	// and DefaultMaxVolumeFiles.
	MaxVolumeBytes int
	MaxVolumeFiles int
	// MaxUsageEntries bounds the walk that measures one emptyDir with a
	// sizeLimit. Defaults to DefaultMaxUsageEntries.
	MaxUsageEntries int
}

// New returns a Manager keeping pods' volumes under root, a directory it
// owns alone (created if missing): <root>/<pod UID>/<volume name>. It
// reads secrets and config maps through objects (nil: volumes of those
// fail their setup, saying so) and asks pods (the engine, required) when a
// pod's volumes may go. It starts nothing: call Run. The error says which
// argument or option is invalid.
func New(root string, objects podenv.Objects, pods ContentRemovalChecker, opts Options) (*Manager, error) {
	switch {
	case root == "":
		return nil, errors.New("volume: New needs a root directory")
	case pods == nil:
		return nil, errors.New("volume: New needs a ContentRemovalChecker (the engine's window)")
	case opts.RefreshInterval < 0:
		return nil, fmt.Errorf("volume: Options.RefreshInterval is %v; want 0 (the default, %v) or more", opts.RefreshInterval, DefaultRefreshInterval)
	case opts.MaxVolumeBytes < 0, opts.MaxVolumeFiles < 0, opts.MaxUsageEntries < 0:
		return nil, fmt.Errorf("volume: Options.MaxVolumeBytes (%d), MaxVolumeFiles (%d) and MaxUsageEntries (%d) may not be negative", opts.MaxVolumeBytes, opts.MaxVolumeFiles, opts.MaxUsageEntries)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("volume: root %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("volume: creating root: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Tmpfs == nil {
		opts.Tmpfs = LinuxTmpfs{}
	}
	if opts.RefreshInterval == 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.MaxVolumeBytes == 0 {
		opts.MaxVolumeBytes = DefaultMaxVolumeBytes
	}
	if opts.MaxVolumeFiles == 0 {
		opts.MaxVolumeFiles = DefaultMaxVolumeFiles
	}
	if opts.MaxUsageEntries == 0 {
		opts.MaxUsageEntries = DefaultMaxUsageEntries
	}
	return &Manager{
		root:     abs,
		objects:  objects,
		pods:     pods,
		tokens:   opts.Tokens,
		recorder: event.OrDiscard(opts.Recorder),
		logger:   opts.Logger,
		clock:    opts.Clock,
		opts:     opts,
		wake:     make(chan struct{}, 1),
		recs:     map[types.UID]*podRecord{},
	}, nil
}
