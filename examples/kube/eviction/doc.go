// Package eviction is the final status of a pod the node evicts, as the
// kubelet's eviction manager gives it (phase Failed, reason Evicted, a
// DisruptionTarget condition), to hand to the pod workers with the kill.
// Which pod to evict, and when, is the agent's choice: podkit has no
// resource-pressure signals of its own (see agent.EvictPod).
package eviction
