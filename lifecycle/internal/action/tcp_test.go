package action

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "db", ContainerPort: port}}}

	res := TCP(context.Background(), &v1.TCPSocketAction{Port: intstr.FromString("db")}, c, "127.0.0.1")
	assert.Equal(t, Success, res.Outcome, res.Output)

	res = TCP(context.Background(), &v1.TCPSocketAction{Port: intstr.FromInt32(port), Host: "127.0.0.1"}, c, "")
	assert.Equal(t, Success, res.Outcome, "the action's host wins")

	res = TCP(context.Background(), &v1.TCPSocketAction{Port: intstr.FromInt32(int32(closedPort(t)))}, c, "127.0.0.1")
	assert.Equal(t, Failure, res.Outcome)
	assert.Contains(t, res.Output, "connection refused")

	res = TCP(context.Background(), &v1.TCPSocketAction{Port: intstr.FromString("nope")}, c, "127.0.0.1")
	assert.Equal(t, Unknown, res.Outcome)
	res = TCP(context.Background(), &v1.TCPSocketAction{Port: intstr.FromInt32(port)}, c, "")
	assert.Equal(t, Unknown, res.Outcome)
	res = TCP(context.Background(), nil, c, "127.0.0.1")
	assert.Equal(t, Unknown, res.Outcome)
}

func TestTCPTimeoutMessage(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	ctx, cancel := WithTimeout(context.Background(), clk, time.Second)
	defer cancel()
	clk.Step(time.Second)
	res := TCP(ctx, &v1.TCPSocketAction{Port: intstr.FromInt32(9)}, &v1.Container{}, "127.0.0.1")
	assert.Equal(t, Failure, res.Outcome)
	assert.Equal(t, "dial tcp 127.0.0.1:9: i/o timeout", res.Output)
}
