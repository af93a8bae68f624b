package kubeletserver_test

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

func TestNewRefusesBadOptions(t *testing.T) {
	p := newPKI(t)
	full := kubeletserver.Options{
		NodeName:    "n",
		Certificate: p.serving,
		ClientCA:    p.caPEM,
		Client:      fakeAPIServer(t),
		Pods:        func(string, string) (*v1.Pod, bool) { return nil, false },
	}
	_, err := kubeletserver.New(full)
	require.NoError(t, err)
	for name, breakIt := range map[string]func(*kubeletserver.Options){
		"NodeName":         func(o *kubeletserver.Options) { o.NodeName = "" },
		"Certificate":      func(o *kubeletserver.Options) { o.Certificate = tls.Certificate{} },
		"ClientCA":         func(o *kubeletserver.Options) { o.ClientCA = nil },
		"Client":           func(o *kubeletserver.Options) { o.Client = nil },
		"Pods":             func(o *kubeletserver.Options) { o.Pods = nil },
		"Streaming":        func(o *kubeletserver.Options) { o.Streaming, o.StreamURLs = newFakeStreamer(), &fakeLocator{} },
		"MaxStreams":       func(o *kubeletserver.Options) { o.MaxStreams = -1 },
		"MaxStreamsPerPod": func(o *kubeletserver.Options) { o.MaxStreams, o.MaxStreamsPerPod = 2, 3 },
		"MaxLogReads":      func(o *kubeletserver.Options) { o.MaxLogReads = -1 },
		"MaxConnections": func(o *kubeletserver.Options) {
			o.MaxConnections = kubeletserver.DefaultMaxStreams + kubeletserver.DefaultMaxLogReads
		},
		"StreamIdleTimeout":     func(o *kubeletserver.Options) { o.StreamIdleTimeout = -time.Second },
		"StreamCreationTimeout": func(o *kubeletserver.Options) { o.StreamCreationTimeout = -time.Second },
		"ReadHeaderTimeout":     func(o *kubeletserver.Options) { o.ReadHeaderTimeout = -time.Second },
		"IdleTimeout":           func(o *kubeletserver.Options) { o.IdleTimeout = -time.Second },
	} {
		o := full
		breakIt(&o)
		_, err := kubeletserver.New(o)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "kubeletserver: Options."+name)
	}
	o := full
	o.ClientCA = []byte("not PEM")
	_, err = kubeletserver.New(o)
	assert.ErrorContains(t, err, "kubeletserver: the client CA")
}
