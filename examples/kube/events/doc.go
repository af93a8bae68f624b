// Package events records the kubelet's events in a real cluster: Recorder
// sends them through client-go's broadcaster (aggregated, rate-limited,
// never blocking; a failing API server loses events, not pods) as the
// kubelet's source component, and reasons.go holds the kubelet's reasons
// and messages, and the object references (ContainerRef, NodeRef) events
// are recorded on.
//
// # Usage
//
//  1. Create a Recorder with New over clientset.CoreV1() and the node name;
//     it is the event.Recorder of the agent (lifecycle.AgentOptions.Recorder)
//     and of its manifest source.
//  2. Run it as one of the agent's loops (Recorder.Run), or Close it if it
//     will not run.
//
// # Concurrency
//
// Recorder is safe for concurrent use; Eventf never blocks.
package events
