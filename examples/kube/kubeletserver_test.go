package kube_test

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

func TestParseLogOptions(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		query  string
		want   *v1.PodLogOptions
		status int
	}{
		{query: "", want: &v1.PodLogOptions{}},
		{query: "follow=true&previous=1&timestamps=true", want: &v1.PodLogOptions{Follow: true, Previous: true, Timestamps: true}},
		{query: "tailLines=3&limitBytes=100", want: &v1.PodLogOptions{TailLines: ptr.To[int64](3), LimitBytes: ptr.To[int64](100)}},
		{query: "tailLines=0", want: &v1.PodLogOptions{TailLines: ptr.To[int64](0)}},
		{query: "tail=5", want: &v1.PodLogOptions{TailLines: ptr.To[int64](5)}},
		{query: "tail=all", want: &v1.PodLogOptions{}},
		{query: "sinceSeconds=10", want: &v1.PodLogOptions{SinceTime: ptrTime(now.Add(-10 * time.Second))}},
		{query: "sinceTime=2026-12-01T09:00:00Z", want: &v1.PodLogOptions{SinceTime: ptrTime(now.Add(-time.Hour))}},
		{query: "stream=All", want: &v1.PodLogOptions{}},
		{query: "follow=maybe", status: http.StatusBadRequest},
		{query: "tailLines=x", status: http.StatusBadRequest},
		{query: "sinceTime=yesterday", status: http.StatusBadRequest},
		{query: "stream=Stdout", status: http.StatusBadRequest},
		{query: "tailLines=-1", status: http.StatusUnprocessableEntity},
		{query: "limitBytes=0", status: http.StatusUnprocessableEntity},
		{query: "sinceSeconds=0", status: http.StatusUnprocessableEntity},
		{query: "sinceSeconds=5&sinceTime=2026-12-01T09:00:00Z", status: http.StatusUnprocessableEntity},
	}
	for _, c := range cases {
		q, err := url.ParseQuery(c.query)
		require.NoError(t, err)
		got, status, err := kubeletserver.ParseLogOptions(q, now)
		if c.status != 0 {
			assert.Error(t, err, c.query)
			assert.Equal(t, c.status, status, c.query)
			continue
		}
		require.NoError(t, err, c.query)
		if c.want.SinceTime != nil {
			require.NotNil(t, got.SinceTime, c.query)
			assert.True(t, c.want.SinceTime.Equal(got.SinceTime), "%s: %v", c.query, got.SinceTime)
			c.want.SinceTime, got.SinceTime = nil, nil
		}
		assert.Equal(t, c.want, got, c.query)
	}
}

func ptrTime(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// selfSignedPEM returns a self-signed certificate and its key, in PEM.
func selfSignedPEM(t *testing.T) (certPEM, keyPEM []byte) {
	cert := foreignCert(t)
	der, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func TestKubeletServerNewRefusesIncompleteOptions(t *testing.T) {
	certPEM, keyPEM := selfSignedPEM(t)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	full := kubeletserver.Options{
		NodeName:    "n",
		Certificate: cert,
		ClientCA:    certPEM,
		Client:      fake.NewClientset(),
		Pods:        func(string, string) (*v1.Pod, bool) { return nil, false },
	}
	_, err = kubeletserver.New(full)
	require.NoError(t, err)
	for name, breakIt := range map[string]func(*kubeletserver.Options){
		"NodeName":      func(o *kubeletserver.Options) { o.NodeName = "" },
		"Certificate":   func(o *kubeletserver.Options) { o.Certificate = tls.Certificate{} },
		"ClientCA":      func(o *kubeletserver.Options) { o.ClientCA = nil },
		"Client":        func(o *kubeletserver.Options) { o.Client = nil },
		"Pods":          func(o *kubeletserver.Options) { o.Pods = nil },
		"MaxLogStreams": func(o *kubeletserver.Options) { o.MaxLogStreams = -1 },
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
