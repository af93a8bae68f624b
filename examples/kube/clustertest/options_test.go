package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartRefusesBadOptions: options that cannot make a cluster are
// refused by Start with a message saying why, before anything starts.
func TestStartRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"a node without a name", Options{Nodes: []NodeOptions{{}}}, "a node has no name"},
		{"a node name with a slash", Options{Nodes: []NodeOptions{{Name: "a/b"}}}, `node name "a/b"`},
		{"an upper-case node name", Options{Nodes: []NodeOptions{{Name: "Node-0"}}}, `node name "Node-0"`},
		{"two nodes of one name", Options{Nodes: []NodeOptions{{Name: "n"}, {Name: "n"}}}, `two nodes are named "n"`},
		{"a negative heartbeat", Options{HeartbeatInterval: -time.Second}, "HeartbeatInterval is negative"},
		{"a grace period within a heartbeat", Options{HeartbeatInterval: 5 * time.Second, NodeMonitorGracePeriod: 5 * time.Second}, "must be longer than HeartbeatInterval"},
		{"a negative status report interval", Options{NodeStatusReportInterval: -time.Second}, "NodeStatusReportInterval is negative"},
		{"negative eviction seconds", Options{PodEvictionSeconds: -1}, "PodEvictionSeconds is negative"},
		{"a stages program and the agents' own", Options{StageExecutable: "/bin/stages", OwnStageExecutable: true}, "OwnStageExecutable and StageExecutable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.opts.Dir = dir
			c, err := Start(context.Background(), tc.opts)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "clustertest: ")
			assert.NoDirExists(t, dir+"/control-plane", "nothing was started")
		})
	}
}

// TestAddNodeRefusesABadName: AddNode checks the name as Start does.
func TestAddNodeRefusesABadName(t *testing.T) {
	c := &Cluster{}
	_, err := c.AddNode(context.Background(), NodeOptions{Name: "../x"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `clustertest: node name "../x"`)
}

// TestAddNodesRefusesBadOptionsBeforeAddingAny: one bad name, or two of
// one name, and AddNodes adds none of the nodes.
func TestAddNodesRefusesBadOptionsBeforeAddingAny(t *testing.T) {
	c := &Cluster{}
	for _, tc := range []struct {
		name  string
		nodes []NodeOptions
		want  string
	}{
		{"none", nil, "clustertest: AddNodes: no nodes"},
		{"a bad name last", []NodeOptions{{Name: "good"}, {Name: "Bad"}}, `clustertest: node name "Bad"`},
		{"two of one name", []NodeOptions{{Name: "n"}, {Name: "n"}}, `clustertest: two nodes are named "n"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.AddNodes(context.Background(), tc.nodes...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Empty(t, c.Nodes(), "no node was added")
		})
	}
}
