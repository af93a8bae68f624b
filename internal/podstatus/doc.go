// Package podstatus holds the rules that read or derive what a pod's
// status says, each written once for podkit and its examples, as the
// kubelet applies them: whether a phase is terminal, which init containers
// are sidecars (whose readiness counts like a regular container's),
// whether the restart policy restarts an exited container (ShouldRestart),
// the phase that container statuses give (Phase), the Initialized,
// ContainersReady and Ready conditions with the kubelet's reasons and
// messages, the whole list of conditions a node agent reports
// (Conditions, with StampTransitions for their times), and which readiness
// gates a pod's conditions leave unmet.
//
// The functions are pure and safe for concurrent use; they never modify
// what they are given (StampTransitions fills in the slice it is given).
// The single conditions they return carry no transition time and no
// observed generation; Conditions sets the generation, and the caller,
// which knows the previous status, the times.
package podstatus
