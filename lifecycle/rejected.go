package lifecycle

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// rejectedSet holds the UIDs of the desired pods admission rejected. Such a
// pod stays in the store but never reaches the workers, is not active, and
// its later updates are not sent; it leaves the set when it is admitted
// after all, removed from config, or gone from the store at housekeeping.
// It is the SyncLoop's stand-in for the kubelet's status manager, which
// remembers a rejected pod by its Failed phase.
//
// Safe for concurrent use: GetActivePods reads it from any goroutine while
// the sync loop writes it. Its lock is never held while calling out.
type rejectedSet struct {
	mu   sync.Mutex
	uids map[types.UID]struct{}
}

func newRejectedSet() *rejectedSet {
	return &rejectedSet{uids: map[types.UID]struct{}{}}
}

// has reports whether uid was rejected.
func (s *rejectedSet) has(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.uids[uid]
	return ok
}

// add records that uid was rejected.
func (s *rejectedSet) add(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uids[uid] = struct{}{}
}

// forget drops uid and reports whether it was there.
func (s *rejectedSet) forget(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.uids[uid]
	delete(s.uids, uid)
	return ok
}

// retain drops every UID keep says no to.
func (s *rejectedSet) retain(keep func(types.UID) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid := range s.uids {
		if !keep(uid) {
			delete(s.uids, uid)
		}
	}
}
