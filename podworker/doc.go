// Package podworker is podkit's engine: the kubelet's pod workers, made
// embeddable. PodWorkers[T] keeps one serialized worker per pod UID, runs
// the three hooks of a PodSyncer[T] in order for each pod, coalesces
// updates so only the newest desired state is synced, retries and resyncs
// by itself, and publishes a window that tells every other loop of an
// agent, by UID, whether a pod is being set up, terminating, or
// terminated.
//
// # Usage
//
// An agent implements PodSyncer[T] (T is whatever runtime status its hooks
// work from; struct{} if they fetch it themselves), optionally
// RuntimePodSyncer and a StatusSource[T] — or builds the syncer from
// functions with PodSyncerFuncs, and adds to another syncer's hooks with
// Decorate, which keeps what the other syncer can do. A hook a syncer
// cannot run returns an error wrapping ErrNotImplemented, which the engine
// retries like any failure and never takes for success. Then it:
//
//  1. Creates the engine with New(syncer, Options[T]{...}).
//  2. Runs it: go w.Run(ctx). Run returns once ctx ends and every hook has
//     returned.
//  3. Sends every change of desired state with UpdatePod: SyncPodCreate
//     when a pod is first seen, SyncPodUpdate when it changes (a deletion
//     timestamp or a terminal phase in the pod starts its termination),
//     SyncPodKill to stop it (with KillPodOptions for a grace override, an
//     eviction, or a channel closed once its containers are stopped). The
//     lifecycle package's Handler does this from config updates.
//  4. Calls SyncKnownPods periodically (housekeeping) with every pod config
//     knows, then sends SyncPodCreate for desired pods missing from the
//     result, and kills runtime pods no worker knows with a RunningPod
//     update. lifecycle.SyncLoop.Housekeeping does all of it.
//  5. Reports runtime events (a container exited) with Resync(uid), so the
//     pod's hook runs again soon rather than at the next resync.
//  6. Asks the window (CouldHaveRunningContainers, ShouldPodContentBeRemoved,
//     ...) before touching a pod's resources from any other loop, and may
//     watch transitions with Subscribe, WaitFor or WaitForStage, and read
//     how each pod's last sync went with Pod (LastSyncError,
//     ConsecutiveFailures, NextSyncTime).
//
// # Lifecycle
//
// Each UID moves through these stages (Stage), never backwards:
//
//	absent -> not-started -> syncing -> termination-requested -> terminating -> terminated -> finished -> absent
//	           |   SyncPod*, resynced      |  (SyncPod cancelled)  SyncTerminatingPod+  SyncTerminatedPod+   |
//	           |                           |                                                                 SyncKnownPods forgets
//	           +-- a static pod terminated before it started goes straight to finished, with no hook
//
// Termination is requested by a deletion timestamp, a terminal phase, a
// kill, SyncPod reporting the pod terminal, or SyncKnownPods finding the pod
// orphaned. A SyncPodCreate for a UID whose termination was requested marks
// it RestartRequested: once finished, SyncKnownPods forgets it and the UID
// can start over.
//
// The window answers, for a UID the engine knows:
//
//	                                   syncing  term.requested  terminating  terminated  finished
//	CouldHaveRunningContainers           T          T              T            F           F
//	IsPodTerminationRequested            F          T              T            T           T
//	ShouldPodContainersBeTerminating     F          F              T            T           T
//	IsPodKnownTerminated                 F          F              F            T           T
//	ShouldPodRuntimeBeRemoved            F          F              F            T           T
//	ShouldPodBeFinished                  F          F              F            F           T
//	ShouldPodContentBeRemoved            evicted, or deleted and terminated
//
// For a UID it does not know, every Should... answers true and
// CouldHaveRunningContainers false once SyncKnownPods has been called, and
// the opposite before (a pod could still be running from before the agent
// started).
//
// # Inside the engine
//
// The engine is two layers, in the manner of etcd raft's RawNode and Node.
// The state machine (the unexported machine type, machine*.go and
// queue.go) holds every worker's record and makes every transition: it
// starts no goroutine, takes no lock, calls no hook or callback, and never
// sends on, receives from or closes a channel (the callers' CompletedChs
// are values it keeps, to hand back for closing). Each call returns
// what must happen as effects — stage changes to publish, CompletedChs to
// close, hook contexts to cancel, hooks to report as slow, workers or the
// timer loop to wake — or, for a worker, the next hook call to make (a new
// hook context comes without values: the driver gives it Run's, and the
// pod's logger). The driver, PodWorkers (podworkers.go, worker.go,
// step.go), serializes calls to the machine under one lock and applies
// the effects of every call the same way (applyLocked): it publishes stage
// changes (metrics, Subscribe, WaitFor) under the lock, so they go out in
// order, and closes channels, cancels contexts and logs after releasing
// it. The interaction scripts (testdata/*.txt) drive the machine alone,
// deterministically, with no goroutine (machine_test.go), and then the
// driver over it, with its goroutines, a scripted syncer and a fake clock
// stepped in a testing/synctest bubble (driver_test.go): one script for
// both layers, in the manner of raft's interaction tests.
//
// # Concurrency
//
// Every method of PodWorkers is safe for concurrent use. Hooks of one UID
// never overlap; hooks of different UIDs run concurrently, up to
// Options.MaxConcurrentSyncs when set (termination work first when
// capped). The engine's lock is never held while a hook, the StatusSource
// or a WaitFor condition runs, so hooks may call any method of the engine.
// An idle pod holds no goroutine: workers exist while there is work, and
// when it runs out a few of them (at most GOMAXPROCS, and never more than
// MaxConcurrentSyncs) stay parked, warm, for up to a second of the engine's
// clock, so that the next updates find a goroutine waiting rather than
// start one. Run's return ends them. Hooks run on at most GOMAXPROCS
// workers at once while they are quick; a hook still running 5 ms of the
// engine's clock after the pods behind it began to wait counts as blocked,
// and another worker takes its place, so a pod waits behind blocked hooks
// for 10 ms at most, and hooks that keep blocking
// get, period by period, a worker each (as many as MaxConcurrentSyncs
// allows). An UpdatePod that finds the lock taken does not wait for it: it
// hands its update to the lock's holder, which applies it, in the order
// handed, before it lets go or reads anything (handoff.go), so a burst of
// updates from many goroutines keeps the CPUs busy rather than queued on
// the lock; every method still sees the updates its caller made before.
//
// Hooks get a context that is cancelled when the pod's termination starts
// (SyncPod), when its grace period shortens (SyncTerminatingPod), and when
// Run shuts down. A hook that keeps running Options.SlowHookWarning after
// that (a minute by default) is logged by name, again at that pace, and
// counted; a shutting-down Run says which hooks it still waits for. (A
// context no hook runs with, and that nobody listens to through Done or a
// derived context, is kept for the next hook rather than cancelled: only a
// hook that kept it past its return could tell.) A hook
// that returns an error, or panics, is retried with
// per-pod exponential backoff (Options.BackOff to MaxBackOff, jittered); an
// error made with RetryAfter says when. A successful SyncPod is repeated
// every ResyncInterval. A newer update always runs as soon as the current
// hook returns.
//
// # Grace periods
//
// SyncTerminatingPod gets the shortest grace period requested so far: the
// pod's deletion grace period or a kill's override, else the pod's
// spec.terminationGracePeriodSeconds, else 1. Once set it only ever shortens
// (a shorter request cancels the running SyncTerminatingPod, which is called
// again with it). One rule covers odd values, whatever their source: a
// request below 1 (0 or negative) means 1 — as the API server and the
// kubelet treat them — and never an error; a request above
// MaxGracePeriodSeconds (about 100 years) means MaxGracePeriodSeconds, so
// that time.Duration(gracePeriod)*time.Second never overflows. PodInfo's
// GracePeriod shows the value in effect.
//
// # Where podkit differs from the kubelet
//
// The behaviour follows the kubelet's pod workers (v1.37.2) except:
//
//   - D1: the effective grace period only ever shortens once set; a request
//     below 1 means 1 (see Grace periods).
//   - D2: a kill's CompletedCh is closed exactly when the pod can no longer
//     have running containers, on every path (never started, already
//     finished, runtime-only, forgotten orphans).
//   - D3: a later deletion timestamp or eviction still marks the pod
//     deleted or evicted.
//   - D4: a pod first seen in a terminal phase skips SyncTerminatingPod only
//     when the StatusSource, through StoppedChecker, positively reports
//     nothing running.
//   - D7: when a static pod's full name is freed, the next waiting static
//     pod starts at once.
//   - D8: retries, resyncs and backoff are the engine's own; there is no
//     work queue to drain.
//   - D9: orphans terminate with their computed grace period.
//   - D10: invalid updates are rejected with ErrInvalidUpdate; nothing is
//     recorded.
//   - D11: no goroutine per pod: workers run while there is work, at most
//     GOMAXPROCS at once for quick hooks plus one per blocked hook, and at
//     most GOMAXPROCS stay parked for up to a second after it; no added
//     wait per transition but the 10 ms, at most, it takes to find hooks
//     blocked.
//   - D12: a panicking hook is a failed sync; Run shuts down cleanly.
//   - D13: a static pod that never started (its termination was requested
//     while it waited for its full name) keeps the pod it was given:
//     PodInfo.Pod shows it and SyncKnownPods reports HasConfig true (the
//     kubelet reports false, having no active update for it).
//   - D14: the engine never writes to the caller's KillPodOptions (the
//     kubelet writes the effective grace back into its override); read the
//     effective grace period with Pod.
//   - D15: no "network not ready" retry rule: the kubelet retries an error
//     mentioning it after 1 second; podkit matches no error text, and a
//     syncer asks for a quick retry with RetryAfter.
//
// D5 and D6 belong to the mirror and podmanager packages. Also as in the
// kubelet, on purpose: static-pod start ordering (O(1) per update here), a
// runtime-only kill of a terminated pod is ignored, and a SyncPodCreate
// during termination is only remembered (RestartRequested).
package podworker
