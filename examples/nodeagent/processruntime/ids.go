package processruntime

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// DefaultIDBase is the first host user and group ID of the pods' ID
// ranges when Options.IDBase is zero: above the IDs of a machine's users,
// its system services and the usual subordinate ranges of /etc/subuid.
const DefaultIDBase = 1 << 31

// idRanges hands out the pods' ranges of host user and group IDs: slot n
// is base+n*IDsPerPod and the IDsPerPod IDs after it. A slot belongs to
// one pod UID from its sandbox's start until its cleanup (the slot is
// recorded in the pod's directory, so a restarted agent takes the same
// ones back), never to two.
type idRanges struct {
	base  uint32
	slots int

	mu sync.Mutex
	// owner holds the pod of each slot in use.
	owner map[int]types.UID
}

func newIDRanges(base uint32, slots int) (*idRanges, error) {
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
	return &idRanges{base: base, slots: slots, owner: map[int]types.UID{}}, nil
}

// hostID is the first host ID of slot.
func (r *idRanges) hostID(slot int) uint32 { return r.base + uint32(slot)*sandbox.IDsPerPod }

// allocate gives pod uid the lowest free slot.
func (r *idRanges) allocate(uid types.UID) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := 0; s < r.slots; s++ {
		if _, used := r.owner[s]; !used {
			r.owner[s] = uid
			return s, nil
		}
	}
	return 0, fmt.Errorf("all %d ranges of host IDs are in use", r.slots)
}

// reserve records that pod uid holds slot (read back at Open). It fails
// when the slot is out of range or another pod holds it.
func (r *idRanges) reserve(slot int, uid types.UID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slot < 0 || slot >= r.slots {
		return fmt.Errorf("ID range %d is outside the runtime's %d ranges", slot, r.slots)
	}
	if o, used := r.owner[slot]; used && o != uid {
		return fmt.Errorf("ID range %d is pod %s's", slot, o)
	}
	r.owner[slot] = uid
	return nil
}

// release frees slot if pod uid holds it.
func (r *idRanges) release(slot int, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owner[slot] == uid {
		delete(r.owner, slot)
	}
}
