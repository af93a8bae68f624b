package volume_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/podenv/podenvtest"
	"github.com/podkit/podkit/lifecycle/volume"
)

const ns = "team"

// window is a fake of the engine's window: each pod may run until told
// otherwise, and its content may be removed once told so.
type window struct {
	mu        sync.Mutex
	removable map[types.UID]bool
	stopped   map[types.UID]bool
}

func newWindow() *window {
	return &window{removable: map[types.UID]bool{}, stopped: map[types.UID]bool{}}
}

func (w *window) ShouldPodContentBeRemoved(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.removable[uid]
}

func (w *window) CouldHaveRunningContainers(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.stopped[uid] && !w.removable[uid]
}

// stop says the pod's containers are stopped; remove that its content may
// go.
func (w *window) stop(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped[uid] = true
}

func (w *window) remove(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removable[uid] = true
}

// tmpfs is a fake volume.Tmpfs: it records mounts and mounts nothing.
type tmpfs struct {
	mu      sync.Mutex
	mounted map[string]int64
	// mounts counts Mount calls.
	mounts int
}

func newTmpfs() *tmpfs { return &tmpfs{mounted: map[string]int64{}} }

func (f *tmpfs) Mount(dir string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.mounted[dir]; ok {
		return fmt.Errorf("%s is mounted already", dir)
	}
	f.mounted[dir] = size
	f.mounts++
	return nil
}

func (f *tmpfs) Unmount(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.mounted[dir]; !ok {
		return fmt.Errorf("%s is not mounted", dir)
	}
	delete(f.mounted, dir)
	return nil
}

func (f *tmpfs) IsMountPoint(dir string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.mounted[dir]
	return ok, nil
}

func (f *tmpfs) size(dir string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.mounted[dir]
	return s, ok
}

// events records events as "Type Reason message".
type events struct {
	mu  sync.Mutex
	all []string
}

func (e *events) recorder() event.Recorder {
	return event.RecorderFunc(func(_ runtime.Object, eventType, reason, msgFmt string, args ...any) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.all = append(e.all, eventType+" "+reason+" "+fmt.Sprintf(msgFmt, args...))
	})
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.all
	e.all = nil
	return out
}

// env is one test's manager and its fakes.
type env struct {
	t       *testing.T
	root    string
	objects *podenvtest.Objects
	window  *window
	tmpfs   *tmpfs
	events  *events
	m       *volume.Manager
}

// selfOwned maps every id of a pod to the test process's own, so that the
// tests need no privilege to set owners.
func selfOwned(*v1.Pod, int, int) (int, int, error) { return os.Getuid(), os.Getgid(), nil }

// newEnv returns a manager over fakes, rooted in a temporary directory;
// opts' zero fields get the fakes.
func newEnv(t *testing.T, opts volume.Options) *env {
	t.Helper()
	e := &env{t: t, root: t.TempDir(), objects: &podenvtest.Objects{}, window: newWindow(), tmpfs: newTmpfs(), events: &events{}}
	if opts.Tmpfs == nil {
		opts.Tmpfs = e.tmpfs
	}
	if opts.Recorder == nil {
		opts.Recorder = e.events.recorder()
	}
	if opts.MapIDs == nil {
		opts.MapIDs = selfOwned
	}
	m, err := volume.New(e.root, e.objects, e.window, opts)
	require.NoError(t, err)
	e.m = m
	return e
}

// pod returns a pod in ns with uid and volumes.
func pod(uid types.UID, volumes ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + string(uid), UID: uid,
			Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			ServiceAccountName: "robot",
			Containers:         []v1.Container{{Name: "main"}},
			Volumes:            volumes,
		},
	}
}

func setUp(t *testing.T, e *env, p *v1.Pod) {
	t.Helper()
	require.NoError(t, e.m.SetUp(context.Background(), p))
}

// tree lists the visible files of dir (following the volume's links) as
// "path=content", sorted, leaving out the writer's own ..names.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	var walk func(rel string)
	walk = func(rel string) {
		entries, err := os.ReadDir(filepath.Join(dir, rel))
		require.NoError(t, err)
		for _, en := range entries {
			name := filepath.Join(rel, en.Name())
			if strings.HasPrefix(en.Name(), "..") {
				continue
			}
			fi, err := os.Stat(filepath.Join(dir, name))
			require.NoError(t, err)
			if fi.IsDir() {
				walk(name)
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			out = append(out, name+"="+string(data))
		}
	}
	walk("")
	sort.Strings(out)
	return out
}

// mode returns the permission bits (and setgid) of path, followed.
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSticky)
}

// readLink returns the directory the ..data link of dir points to.
func readLink(t *testing.T, dir string) string {
	t.Helper()
	ts, err := os.Readlink(filepath.Join(dir, "..data"))
	require.NoError(t, err)
	return ts
}
