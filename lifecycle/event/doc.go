// Package event is the one shape of an event recorder in podkit: the
// Recorder that every package of the agent's sync loop and of its per-pod
// loops (config sources, admission, probes, container hooks, volumes, the
// active deadline, node shutdown) reports the kubelet's events through.
//
// Recorder is the one method of client-go's record.EventRecorder that
// podkit uses, so such a recorder fits as it is; RecorderFunc adapts a
// function, and Discard drops every event. Each package that records
// events lists its reasons beside the code that records them.
//
// # Concurrency
//
// A Recorder is called from many goroutines at once (the sync loop, pod
// workers' hooks, probe workers): an implementation must be safe for
// concurrent use, must not block for long, and must not call back into
// the component that records.
package event
