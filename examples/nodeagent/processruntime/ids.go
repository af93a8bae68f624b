package processruntime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// DefaultIDBase is the first host user and group ID of the pods' ID
// ranges when Options.IDBase is zero: above the IDs of a machine's users,
// its system services and the usual subordinate ranges of /etc/subuid.
const DefaultIDBase = 1 << 31

// DefaultIDRegistry is where the runtimes of a machine record which pod
// holds which range of host IDs, when Options.IDRegistry is empty: a
// directory under /run, which a reboot (that ends every pod) empties.
const DefaultIDRegistry = "/run/podkit/idranges"

// idClaimGrace is how long a fresh claim of a range is never taken for a
// stale one (its pod's directory may not exist yet).
const idClaimGrace = time.Minute

// idRanges hands out the pods' ranges of host user and group IDs: slot n
// is base+n*IDsPerPod and the IDsPerPod IDs after it. A slot belongs to
// one pod from its first use (MapIDs, or its sandbox's start) until its
// cleanup, never to two pods, not even of two runtimes of the machine:
// each claim is a file of the machine's registry (one per slot, made with
// O_EXCL, naming the runtime's state directory and the pod's UID), which
// a restarted runtime takes back. A claim whose pod no longer has a
// directory in its runtime's state directory is stale and taken over.
type idRanges struct {
	base     uint32
	slots    int
	registry string
	// stateDir names this runtime in its claims.
	stateDir string

	mu sync.Mutex
	// owner holds the pod of each slot this runtime holds.
	owner map[int]types.UID
}

func newIDRanges(base uint32, slots int, registry, stateDir string) (*idRanges, error) {
	if base == 0 {
		base = DefaultIDBase
	}
	fit := int((uint64(1<<32-1) - uint64(base)) / sandbox.IDsPerPod)
	if slots == 0 {
		slots = fit
	}
	switch {
	case base < sandbox.IDsPerPod:
		return nil, fmt.Errorf("processruntime: Options.IDBase %d would map host IDs below %d (host root's and the machine's users') into pods", base, sandbox.IDsPerPod)
	case slots < 0 || slots > fit:
		return nil, fmt.Errorf("processruntime: Options.IDRanges %d: from IDBase %d at most %d ranges of %d IDs fit", slots, base, fit, sandbox.IDsPerPod)
	case slots == 0:
		return nil, fmt.Errorf("processruntime: no range of %d IDs fits above Options.IDBase %d", sandbox.IDsPerPod, base)
	}
	if registry == "" {
		registry = DefaultIDRegistry
	}
	if err := os.MkdirAll(registry, 0o700); err != nil {
		return nil, fmt.Errorf("processruntime: the registry of ID ranges: %w", err)
	}
	return &idRanges{base: base, slots: slots, registry: registry, stateDir: stateDir, owner: map[int]types.UID{}}, nil
}

// hostID is the first host ID of slot.
func (r *idRanges) hostID(slot int) uint32 { return r.base + uint32(slot)*sandbox.IDsPerPod }

func (r *idRanges) claimPath(slot int) string {
	return filepath.Join(r.registry, strconv.Itoa(int(r.base))+"-"+strconv.Itoa(slot))
}

func (r *idRanges) claim(uid types.UID) []byte { return []byte(r.stateDir + "\n" + string(uid) + "\n") }

// allocate gives pod uid the slot it holds, or the lowest free one.
func (r *idRanges) allocate(uid types.UID) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s, o := range r.owner {
		if o == uid {
			return s, nil
		}
	}
	for s := 0; s < r.slots; s++ {
		if _, ours := r.owner[s]; ours {
			continue
		}
		ok, err := r.claimLocked(s, uid)
		if err != nil {
			return 0, err
		}
		if ok {
			r.owner[s] = uid
			return s, nil
		}
	}
	return 0, fmt.Errorf("all %d ranges of host IDs are in use", r.slots)
}

// claimLocked records the claim of slot for uid in the registry, unless a
// live claim of another pod holds it.
func (r *idRanges) claimLocked(slot int, uid types.UID) (bool, error) {
	path := r.claimPath(slot)
	for attempt := 0; attempt < 2; attempt++ {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = f.Write(r.claim(uid))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				_ = os.Remove(path)
				return false, fmt.Errorf("claiming ID range %d: %w", slot, err)
			}
			return true, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return false, fmt.Errorf("claiming ID range %d: %w", slot, err)
		}
		if attempt > 0 || !r.stale(path) {
			return false, nil
		}
		_ = os.Remove(path)
	}
	return false, nil
}

// stale reports whether the claim at path is of a pod that is gone: its
// runtime's state directory has no directory for it, and the claim is
// older than idClaimGrace.
func (r *idRanges) stale(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || time.Since(fi.ModTime()) < idClaimGrace {
		return false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	dir, uid, ok := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if !ok || !filepath.IsAbs(dir) || validUID(types.UID(uid)) != nil {
		return true // damaged
	}
	_, err = os.Stat(filepath.Join(dir, "pods", uid))
	return errors.Is(err, os.ErrNotExist)
}

// reserve takes back, at Open, the slot pod uid held in an earlier run.
// It fails when the slot is out of range or another pod's.
func (r *idRanges) reserve(slot int, uid types.UID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slot < 0 || slot >= r.slots {
		return fmt.Errorf("ID range %d is outside the runtime's %d ranges", slot, r.slots)
	}
	if o, used := r.owner[slot]; used && o != uid {
		return fmt.Errorf("ID range %d is pod %s's", slot, o)
	}
	b, err := os.ReadFile(r.claimPath(slot))
	switch {
	case err == nil && string(b) == string(r.claim(uid)):
	case errors.Is(err, os.ErrNotExist):
		// The registry was emptied (a reboot ends the pods, so this is a
		// tombstone's): claim it again.
		ok, err := r.claimLocked(slot, uid)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("ID range %d is claimed by another pod", slot)
		}
	case err != nil:
		return fmt.Errorf("reading the claim of ID range %d: %w", slot, err)
	default:
		return fmt.Errorf("ID range %d is claimed by another pod: %s", slot, strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " "))
	}
	r.owner[slot] = uid
	return nil
}

// releaseUID frees the slot pod uid holds, if any.
func (r *idRanges) releaseUID(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s, o := range r.owner {
		if o != uid {
			continue
		}
		delete(r.owner, s)
		if b, err := os.ReadFile(r.claimPath(s)); err == nil && string(b) == string(r.claim(uid)) {
			_ = os.Remove(r.claimPath(s))
		}
	}
}

// releaseIDClaims drops the claims of DefaultIDRegistry that name the
// runtime of stateDir (see RemoveCgroups).
func releaseIDClaims(stateDir string) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return
	}
	entries, _ := os.ReadDir(DefaultIDRegistry)
	for _, e := range entries {
		path := filepath.Join(DefaultIDRegistry, e.Name())
		if b, err := os.ReadFile(path); err == nil && strings.HasPrefix(string(b), abs+"\n") {
			_ = os.Remove(path)
		}
	}
}
