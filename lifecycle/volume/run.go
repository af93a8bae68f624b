package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Run keeps the volumes of the node's pods in step with their sources and
// with the engine's window, until ctx ends; it returns nil then (its work
// is done on its own goroutine: nothing is left running). At start and
// every Options.RefreshInterval it:
//
//   - tears down the volumes of each pod whose content the engine says
//     may be removed, including pods found under the root that no SetUp
//     of this run knows (left by an earlier run of the agent);
//   - refreshes the volumes of each pod that could still have running
//     containers from their sources (the same work as SetUp: an unchanged
//     source writes nothing), recording a FailedMount event when a
//     volume's failure is new;
//   - measures each emptyDir on disk that has a sizeLimit.
//
// Between refreshes it wakes when a service-account token is due (at 80%
// of its lifetime or 24 hours), and refreshes that pod. The volumes of a
// pod whose containers are all stopped are left as they are until its
// content may be removed.
//
// Call Run once; a second call returns an error at once.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.ran {
		m.mu.Unlock()
		return errors.New("volume: Run called twice")
	}
	m.ran = true
	m.mu.Unlock()

	var lastFull time.Time
	for {
		now := m.clock.Now()
		full := lastFull.IsZero() || !now.Before(lastFull.Add(m.opts.RefreshInterval))
		if full {
			lastFull = now
		}
		m.pass(ctx, full, now)
		if ctx.Err() != nil {
			return nil
		}
		next := lastFull.Add(m.opts.RefreshInterval)
		if due := m.earliestDueAfter(now); !due.IsZero() && due.Before(next) {
			next = due
		}
		t := m.clock.NewTimer(next.Sub(m.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		case <-m.wake:
			t.Stop()
		}
	}
}

// earliestDueAfter returns the earliest token refresh of any pod after t
// (zero: none). A refresh due by t that the pass at t left (a pod that can
// no longer run) waits for the next full pass, so Run never spins on it.
func (m *Manager) earliestDueAfter(t time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	var due time.Time
	for _, rec := range m.recs {
		if rec.due.After(t) && (due.IsZero() || rec.due.Before(due)) {
			due = rec.due
		}
	}
	return due
}

// pass does one round of Run's work: every pod's (full), or only the pods
// with a token due by now.
func (m *Manager) pass(ctx context.Context, full bool, now time.Time) {
	m.mu.Lock()
	uids := sortedUIDs(m.recs)
	recs := make([]*podRecord, len(uids))
	dues := make([]time.Time, len(uids))
	for i, uid := range uids {
		recs[i], dues[i] = m.recs[uid], m.recs[uid].due
	}
	m.mu.Unlock()
	for i, rec := range recs {
		if ctx.Err() != nil {
			return
		}
		if m.pods.ShouldPodContentBeRemoved(rec.uid) {
			if _, err := m.TearDown(rec.uid); err != nil {
				m.logger.Error(err, "Couldn't tear down a pod's volumes; trying again later", "podUID", rec.uid)
			}
			continue
		}
		if !m.pods.CouldHaveRunningContainers(rec.uid) {
			continue
		}
		if !full && (dues[i].IsZero() || dues[i].After(now)) {
			continue
		}
		rec.mu.Lock()
		readied := false
		if !rec.removed && rec.pod != nil {
			before := m.allReady(rec)
			// The error was recorded as events; the next pass tries again.
			readied = m.syncLocked(ctx, rec, rec.pod, true) == nil && !before
			if full {
				m.checkSizeLimitsLocked(rec)
			}
		}
		rec.mu.Unlock()
		if readied {
			m.requestSync(rec.uid)
		}
	}
	if full {
		m.removeOrphans()
	}
}

// removeOrphans tears down the directories under the root of pods no
// record knows (an earlier run of the agent set them up) whose content
// may be removed.
func (m *Manager) removeOrphans() {
	entries, err := os.ReadDir(m.root)
	if err != nil {
		m.logger.Error(err, "Couldn't read the volumes' root", "root", m.root)
		return
	}
	for _, e := range entries {
		uid := types.UID(e.Name())
		if !e.IsDir() || validateUID(uid) != nil {
			continue
		}
		m.mu.Lock()
		_, known := m.recs[uid]
		m.mu.Unlock()
		if known {
			continue
		}
		if _, err := m.TearDown(uid); err != nil {
			m.logger.Error(err, "Couldn't tear down the volumes of a pod of an earlier run; trying again later", "podUID", uid)
		}
	}
}

// allReady reports whether every volume of rec's pod the manager prepares
// is ready. rec.mu must be held.
func (m *Manager) allReady(rec *podRecord) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range rec.pod.Spec.Volumes {
		v := &rec.pod.Spec.Volumes[i]
		if _, ok := rec.ready[v.Name]; !ok && v.HostPath == nil {
			return false
		}
	}
	return true
}

// requestSync calls Options.RequestSync, surviving its panic.
func (m *Manager) requestSync(uid types.UID) {
	if m.opts.RequestSync == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			m.logger.Error(fmt.Errorf("%v", r), "Options.RequestSync panicked", "podUID", uid)
		}
	}()
	m.opts.RequestSync(uid)
}
