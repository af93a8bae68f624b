package kubeletserver

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// streamSlots caps the long-lived streams (followed logs, exec, attach,
// port-forward sessions): at most max at once in all, and at most perPod
// for one pod. Every client arrives through the API server as the API
// server's kubelet-client identity, so the caps count targets, not
// users. Safe for concurrent use.
type streamSlots struct {
	max, perPod int

	mu sync.Mutex
	// total is the number of slots held; it equals the sum of byPod.
	total int
	// byPod counts the slots held per pod; it holds no zero entry.
	byPod map[types.UID]int
}

func newStreamSlots(max, perPod int) *streamSlots {
	return &streamSlots{max: max, perPod: perPod, byPod: map[types.UID]int{}}
}

// acquire takes a slot for a stream of pod uid, or says which cap is
// reached. The caller calls release exactly once when the stream ends.
func (s *streamSlots) acquire(uid types.UID) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.total >= s.max:
		return nil, fmt.Errorf("too many long-lived streams (followed logs, exec, attach, port-forward) on this node at once: at most %d", s.max)
	case s.byPod[uid] >= s.perPod:
		return nil, fmt.Errorf("too many long-lived streams (followed logs, exec, attach, port-forward) to this pod at once: at most %d", s.perPod)
	}
	s.total++
	s.byPod[uid]++
	var once sync.Once
	return func() { once.Do(func() { s.release(uid) }) }, nil
}

func (s *streamSlots) release(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.byPod[uid]--; s.byPod[uid] == 0 {
		delete(s.byPod, uid)
	}
}

// held returns the number of slots held, in all and for pod uid.
func (s *streamSlots) held(uid types.UID) (total, pod int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, s.byPod[uid]
}
