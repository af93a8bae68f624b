package clustertest

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube/internal/background"
	"github.com/podkit/podkit/examples/kube/nodestatus"
)

// Node is one podkit node of a cluster: an agent and a heartbeat, each of
// which can be stopped and started again. Its methods are safe for
// concurrent use.
type Node struct {
	env      NodeEnv
	newAgent func(NodeEnv) (Agent, error)
	beat     *nodestatus.Heartbeat

	mu        sync.Mutex
	agent     Agent
	agentRun  *background.Task
	heartbeat *background.Task
}

// Name returns the node's name.
func (n *Node) Name() string { return n.env.Name }

// Client returns a clientset that acts as the node (system:node:<name>).
func (n *Node) Client() kubernetes.Interface { return n.env.Client }

// StateDir returns the node's state directory.
func (n *Node) StateDir() string { return n.env.StateDir }

// Agent returns the running agent (for the default agent, an
// *agent.Agent), or nil when it is stopped.
func (n *Node) Agent() Agent {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agentRun == nil {
		return nil
	}
	return n.agent
}

// StopHeartbeat stops the node's heartbeat and waits until no beat is in
// flight. The agent keeps running; after the NodeMonitorGracePeriod the
// control plane sees the node as unreachable. Stopping a stopped
// heartbeat does nothing.
func (n *Node) StopHeartbeat() {
	n.mu.Lock()
	hb := n.heartbeat
	n.heartbeat = nil
	n.mu.Unlock()
	if hb != nil {
		_ = hb.Stop() // Run returns nil once started
	}
}

// ResumeHeartbeat starts the node's heartbeat again (at once: the first
// beat is immediate). Resuming a running heartbeat does nothing.
func (n *Node) ResumeHeartbeat() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.heartbeat == nil {
		n.heartbeat = background.Go(n.beat.Run)
	}
}

// StopAgent stops the node's agent and waits until its Run returned, and
// returns Run's error. The pods' processes keep running, as when a real
// agent dies; StartAgent adopts them. The heartbeat is not touched.
// Stopping a stopped agent returns nil.
func (n *Node) StopAgent() error {
	n.mu.Lock()
	run := n.agentRun
	n.agentRun = nil
	n.mu.Unlock()
	if run == nil {
		return nil
	}
	if err := run.Stop(); err != nil {
		return fmt.Errorf("clustertest: the agent of node %q: %w", n.env.Name, err)
	}
	return nil
}

// StartAgent builds a new agent for the node (Options.NewAgent, on the
// same state directory) and runs it. It is an error while an agent runs.
func (n *Node) StartAgent() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agentRun != nil {
		if done, _ := n.agentRun.Stopped(); !done {
			return fmt.Errorf("clustertest: the agent of node %q is running", n.env.Name)
		}
	}
	a, err := n.newAgent(n.env)
	if err != nil {
		return fmt.Errorf("clustertest: building the agent of node %q: %w", n.env.Name, err)
	}
	if a == nil {
		return fmt.Errorf("clustertest: NewAgent returned no agent for node %q", n.env.Name)
	}
	n.agent = a
	n.agentRun = background.Go(a.Run)
	return nil
}

// AgentErr returns the error of an agent that stopped on its own (Run
// returned while the harness did not stop it), nil while it runs or after
// StopAgent.
func (n *Node) AgentErr() error {
	n.mu.Lock()
	run := n.agentRun
	n.mu.Unlock()
	if run == nil {
		return nil
	}
	done, err := run.Stopped()
	if !done {
		return nil
	}
	if err == nil {
		err = errors.New("it returned")
	}
	return fmt.Errorf("clustertest: the agent of node %q stopped on its own: %w", n.env.Name, err)
}

// stop stops the heartbeat and the agent.
func (n *Node) stop() error {
	n.StopHeartbeat()
	return n.StopAgent()
}
