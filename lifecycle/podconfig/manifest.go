package podconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/mirror"
)

// DefaultManifestInterval is how often a ManifestSource reads its directory
// when ManifestOptions.Interval is 0, the kubelet's default.
const DefaultManifestInterval = 20 * time.Second

// ManifestOptions configure a ManifestSource.
type ManifestOptions struct {
	// NodeName is the node the agent runs as. Required: it is part of each
	// static pod's name, UID and spec.nodeName (mirror.PrepareStaticPod).
	NodeName string
	// Source is the source name the pods are sent under and stamped with.
	// Defaults to mirror.FileSource. It must not be mirror.ApiserverSource.
	Source string
	// Interval is how often the directory is read again. Defaults to
	// DefaultManifestInterval; negative is an error.
	Interval time.Duration
	// MaxFileSize is the largest manifest file read, in bytes; a larger one
	// is reported and gives no pod. Defaults to DefaultMaxManifestSize
	// (1.5 MiB, the API server's object limit); negative is an error.
	MaxFileSize int64
	// ReadTimeout bounds the time reading one manifest file may take; a
	// file whose read takes longer is reported, gives no pod, and is not
	// read again until that read returns. Defaults to
	// DefaultManifestReadTimeout; negative is an error.
	ReadTimeout time.Duration
	// Clock drives the interval and the read timeout. Defaults to the real
	// clock.
	Clock clock.WithTicker
	// Logger receives the source's logs. Defaults to the zero Logger,
	// which discards.
	Logger logr.Logger
	// Recorder receives a ReasonInvalidManifest Warning event, about the
	// Node, for each manifest file that cannot be used, and a
	// ReasonMultipleDocuments one for each file holding more than one YAML
	// document, once per content. Defaults to event.Discard.
	Recorder event.Recorder
}

// ManifestSource is a config source that reads static pod manifests from a
// directory: one pod per file, in YAML or JSON, with apiVersion v1 and kind
// Pod. Files whose names start with "." are ignored, as are names that do
// not end in ".yaml", ".yml" or ".json" (editor backups, say) and
// subdirectories. A file of several YAML documents gives the pod of its
// first, with a warning (log and ReasonMultipleDocuments event).
//
// One bad file cannot freeze or crash the node: a file is read only if it
// is a regular file (checked before it is opened, so a device is never
// opened, and again once it is: a named pipe, a device or a socket, even
// behind a symlink, is reported, never read) of at most MaxFileSize bytes
// (checked from its size, then by reading no more than that), outside
// /proc and /sys, within ReadTimeout (a read that takes longer is
// abandoned, and the file is not read again until that read returns; at
// most 16 such reads may be pending). No lock is held while reading, and
// Run returns as soon as its context ends, without waiting for a read.
//
// Each pod is decoded strictly (an unknown or duplicated field makes the
// file unusable, so a typo is reported instead of silently ignored) and
// taken as written, except that an unset spec.terminationGracePeriodSeconds
// becomes the API default of 30 seconds (the pod workers would otherwise
// give it 1); no other API defaulting is applied, so hooks must read unset
// fields as their API defaults. It is then prepared with
// mirror.PrepareStaticPod, which gives it its UID (a hash of the content,
// node name and source), the node-suffixed name, namespace, node name and
// config annotations.
//
// A file that cannot be read, decoded or prepared is reported (log and
// event) and contributes no pod until it is fixed; the other files' pods
// are unaffected. As in the kubelet, a file that was good and turns bad
// therefore removes its pod. A missing directory counts as empty; a
// directory that cannot be listed keeps the last snapshot.
//
// Create it with NewManifestSource and call Run; Scan does one read for
// agents that drive time themselves. Methods are safe for concurrent use.
type ManifestSource struct {
	dir      string
	nodeName string
	source   string
	interval time.Duration
	clock    clock.WithTicker
	log      logr.Logger
	recorder event.Recorder
	nodeRef  *v1.ObjectReference
	reads    *manifestReads
	// decode is decodeManifest; tests count its calls.
	decode func(data []byte) (*v1.Pod, int, error)

	// scanning holds a value while a scan runs: scans run one at a time,
	// and a caller whose context ends stops waiting for its turn.
	scanning chan struct{}
	// mu guards the fields below; it is never held during I/O.
	mu sync.Mutex
	// files holds, by file name, what each file last read gave.
	files map[string]*manifestFile
	// scanned is set after the first successful Scan.
	scanned bool
}

// manifestFile is what one manifest file gave the last time it was read.
type manifestFile struct {
	// read is set when the file was read: data is its content and pod,
	// err and documents are what decoding and preparing it gave.
	read bool
	data []byte
	// pod is the prepared static pod, nil when err is set.
	pod *v1.Pod
	// err says why the file gives no pod.
	err error
	// documents is how many YAML documents the file holds (only the first
	// gives the pod).
	documents int
}

// NewManifestSource returns a source for the manifests in dir. It reads
// nothing yet. It returns an error, prefixed "podconfig: ", for an empty
// dir or node name, an API server source name, or a negative interval,
// file size cap or read timeout.
func NewManifestSource(dir string, opts ManifestOptions) (*ManifestSource, error) {
	switch {
	case dir == "":
		return nil, errors.New("podconfig: NewManifestSource needs a directory, got \"\"")
	case opts.NodeName == "":
		return nil, errors.New("podconfig: ManifestOptions.NodeName is empty; static pods need the node's name")
	case opts.Source == mirror.ApiserverSource:
		return nil, fmt.Errorf("podconfig: ManifestOptions.Source is %q, which would make the manifests API pods", opts.Source)
	case opts.Interval < 0:
		return nil, fmt.Errorf("podconfig: ManifestOptions.Interval is %v; want 0 (default) or more", opts.Interval)
	case opts.MaxFileSize < 0:
		return nil, fmt.Errorf("podconfig: ManifestOptions.MaxFileSize is %d; want 0 (default) or more", opts.MaxFileSize)
	case opts.ReadTimeout < 0:
		return nil, fmt.Errorf("podconfig: ManifestOptions.ReadTimeout is %v; want 0 (default) or more", opts.ReadTimeout)
	}
	if opts.MaxFileSize == 0 {
		opts.MaxFileSize = DefaultMaxManifestSize
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = DefaultManifestReadTimeout
	}
	if opts.Source == "" {
		opts.Source = mirror.FileSource
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultManifestInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &ManifestSource{
		dir:      dir,
		nodeName: opts.NodeName,
		source:   opts.Source,
		interval: opts.Interval,
		clock:    opts.Clock,
		log:      opts.Logger.WithValues("manifestDir", dir),
		recorder: event.OrDiscard(opts.Recorder),
		nodeRef:  &v1.ObjectReference{Kind: "Node", Name: opts.NodeName, UID: types.UID(opts.NodeName)},
		reads:    newManifestReads(opts.MaxFileSize, opts.ReadTimeout, opts.Clock),
		decode:   decodeManifest,
		scanning: make(chan struct{}, 1),
		files:    map[string]*manifestFile{},
	}, nil
}

// Source returns the source name the pods are sent under.
func (s *ManifestSource) Source() string { return s.source }

// Run sends a snapshot of the directory to sink at once and then, every
// interval, again whenever a file was added, changed or removed, until ctx
// ends (it then returns nil). It returns an error when sink fails for a
// reason other than ctx's end, or for a nil sink. A failure to list the
// directory is logged and the next interval tried; until a first listing
// succeeds nothing is sent, so the source is not ready. It returns as
// soon as ctx ends, even in the middle of a read that blocks. Call it from
// a goroutine of its own.
func (s *ManifestSource) Run(ctx context.Context, sink PodSink) error {
	if sink == nil {
		return errors.New("podconfig: ManifestSource.Run needs a PodSink, got nil")
	}
	ticker := s.clock.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		pods, changed, err := s.scan(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.Error(err, "Reading the manifest directory failed; keeping the last snapshot")
		case changed:
			if err := sink.SetPods(ctx, s.source, pods); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// The snapshot was not taken: send it again next time.
				s.mu.Lock()
				s.scanned = false
				s.mu.Unlock()
				return fmt.Errorf("podconfig: manifest source %s: %w", s.dir, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// Scan reads the directory once and returns the static pods of its usable
// manifests, sorted by file name, and whether anything changed since the
// previous successful Scan (always true for the first). Unchanged files are
// not decoded again, and a broken file is reported only when its content
// changes. The pods are new copies and the caller's. The error, prefixed
// "podconfig: ", says the directory could not be listed; nothing is
// changed then. Scans run one at a time; each takes at most ReadTimeout
// per file whose read blocks.
func (s *ManifestSource) Scan() (pods []*v1.Pod, changed bool, err error) {
	return s.scan(context.Background())
}

// scan is Scan, which gives up (returning ctx's error and changing
// nothing) when ctx ends.
func (s *ManifestSource) scan(ctx context.Context) (pods []*v1.Pod, changed bool, err error) {
	select {
	case s.scanning <- struct{}{}:
		defer func() { <-s.scanning }()
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	names, err := s.list()
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	prevFiles, scanned := s.files, s.scanned
	s.mu.Unlock()

	changed = !scanned || len(names) != len(prevFiles)
	next := make(map[string]*manifestFile, len(names))
	for _, name := range names {
		f := s.read(ctx, name, prevFiles[name])
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if errors.Is(f.err, errIsDir) {
			continue
		}
		if prev, ok := prevFiles[name]; ok && prev.same(f) {
			f = prev
		} else {
			changed = true
			s.reportRead(name, f)
		}
		next[name] = f
		if f.pod != nil {
			pods = append(pods, f.pod.DeepCopy())
		}
	}
	for name := range prevFiles {
		if _, ok := next[name]; !ok {
			changed = true
			s.log.V(4).Info("Static pod manifest removed", "file", name)
		}
	}
	s.mu.Lock()
	s.files = next
	s.scanned = true
	s.mu.Unlock()
	return pods, changed, nil
}

// reportRead logs, and records an event for, what reading a new or
// changed file gave.
func (s *ManifestSource) reportRead(name string, f *manifestFile) {
	if f.err != nil {
		s.report(name, f.err)
		return
	}
	s.log.V(4).Info("Read static pod manifest", "file", name, "pod", mirror.PodFullName(f.pod), "podUID", f.pod.UID)
	if f.documents > 1 {
		path := filepath.Join(s.dir, name)
		s.log.Info("A static pod manifest holds more than one YAML document; only the first is used", "file", path, "documents", f.documents)
		s.recorder.Eventf(s.nodeRef, v1.EventTypeWarning, ReasonMultipleDocuments,
			"Static pod manifest %s holds %d YAML documents; only the first (pod %s) is used, the others are ignored", path, f.documents, mirror.PodFullName(f.pod))
	}
}

// list returns the names of the manifest files in the directory, sorted.
func (s *ManifestSource) list() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			s.log.V(2).Info("The manifest directory does not exist; it has no pods")
			return nil, nil
		}
		return nil, fmt.Errorf("podconfig: listing manifest directory %s: %w", s.dir, err)
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		if e.IsDir() {
			continue
		}
		// Anything else, symlinks (common for managed manifests) included,
		// is checked as it is read.
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// read reads and decodes one manifest file, within the bounds of
// manifestReads. When the file holds the bytes prev was read from, it
// returns prev without decoding them again: decoding is most of what a
// scan costs, and a large manifest's decode is milliseconds of CPU at
// every interval. prev may be nil.
func (s *ManifestSource) read(ctx context.Context, name string, prev *manifestFile) *manifestFile {
	data, err := s.reads.readFile(ctx, filepath.Join(s.dir, name))
	switch {
	case errors.Is(err, errIsDir):
		return &manifestFile{err: err}
	case err != nil:
		return &manifestFile{err: fmt.Errorf("reading it: %w", err)}
	case prev != nil && prev.read && bytes.Equal(prev.data, data):
		return prev
	}
	f := &manifestFile{read: true, data: data}
	pod, documents, err := s.decode(data)
	f.documents = documents
	if err == nil {
		err = mirror.PrepareStaticPod(pod, s.nodeName, s.source)
	}
	if err != nil {
		f.err = err
		return f
	}
	f.pod = pod
	return f
}

// same reports whether f and g read the same content with the same
// outcome.
func (f *manifestFile) same(g *manifestFile) bool {
	if f == g {
		return true
	}
	if f.read != g.read || (f.err == nil) != (g.err == nil) || (f.err != nil && f.err.Error() != g.err.Error()) {
		return false
	}
	return bytes.Equal(f.data, g.data)
}

func (s *ManifestSource) report(name string, err error) {
	path := filepath.Join(s.dir, name)
	s.log.Error(err, "Ignoring an unusable static pod manifest until it is fixed", "file", path)
	s.recorder.Eventf(s.nodeRef, v1.EventTypeWarning, ReasonInvalidManifest,
		"Static pod manifest %s is ignored until it is fixed: %v", path, err)
}
