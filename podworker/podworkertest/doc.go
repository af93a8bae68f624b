// Package podworkertest helps test code built on podworker: a fake
// PodSyncer that records and scripts hook calls, helpers that wait for a
// pod worker to reach a stage without polling or sleeping, and
// RunConformance, which checks a real PodSyncer against the hooks' contract.
//
// # Usage
//
//  1. Make a FakeSyncer[T] and hand it to podworker.New as the syncer. It
//     implements podworker.PodSyncer[T] and podworker.RuntimePodSyncer.
//  2. Script what hooks do with Next (per call) and Always (per UID, or for
//     every UID with AnyUID): errors, terminal=true, panics.
//  3. Make a hook "slow" with Hold: the call blocks until the test calls
//     Release on the returned Gate, and Gate.Wait tells the test the hook
//     was entered. The engine's cancellation still reaches a held hook.
//  4. Run the engine with Start, feed it with UpdatePod, and wait for
//     outcomes with podworker.PodWorkers.WaitForStage or
//     FakeSyncer.WaitForTrace.
//  5. Assert on Calls, CallsFor, or the compact Trace, for example
//     "sync:create kill(30) terminated".
//
// To test a real PodSyncer under the engine, wrap it with NewSpySyncer: the
// same recording, scripting and gates, with every unscripted call passed to
// the real syncer. RunConformance checks a real syncer directly, without
// the engine, against the hooks' contract.
//
// # Time
//
// Nothing here sleeps. Tests of retries and resyncs either inject a fake
// clock (k8s.io/utils/clock/testing) into podworker.Options.Clock and
// FakeSyncer.Clock, or run inside a testing/synctest bubble, where
// synctest.Wait says when every worker is idle and time.Sleep moves the
// bubble's fake clock. Create the FakeSyncer and the engine inside the
// bubble.
//
// # Concurrency
//
// FakeSyncer, Gate and the helpers are safe for concurrent use. The
// FakeSyncer records MaxInFlightPerUID, which must stay at most 1: the engine
// never runs two hooks of one UID at once.
package podworkertest
