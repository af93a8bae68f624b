package bootstrap

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: abcdef.0123456789abcdef}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

func TestNewClientRefusesBadOptions(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "bootstrap.kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(testKubeconfig), 0o600))
	good := ClientOptions{NodeName: "n", BootstrapKubeconfig: kc, CertDir: filepath.Join(dir, "pki")}
	c, err := NewClient(good)
	require.NoError(t, err)
	c.Close()
	info, err := os.Stat(good.CertDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "the certificate directory is the owner's only")
	assert.Nil(t, c.Current(), "no certificate before one is issued")
	assert.Equal(t, "https://127.0.0.1:1", c.Config().Host)
	assert.Equal(t, c.CertificatePath(), c.Config().CertFile, "clients present the current pair")

	for name, breakIt := range map[string]func(*ClientOptions){
		"NodeName":            func(o *ClientOptions) { o.NodeName = "" },
		"BootstrapKubeconfig": func(o *ClientOptions) { o.BootstrapKubeconfig = "" },
		"CertDir":             func(o *ClientOptions) { o.CertDir = "" },
		"RequestedLifetime":   func(o *ClientOptions) { o.RequestedLifetime = time.Minute },
	} {
		o := good
		breakIt(&o)
		_, err := NewClient(o)
		require.ErrorContains(t, err, "bootstrap: ClientOptions."+name, name)
	}
	o := good
	o.BootstrapKubeconfig = filepath.Join(dir, "missing")
	_, err = NewClient(o)
	require.ErrorContains(t, err, "bootstrap: reading the bootstrap kubeconfig")
}

func TestNewServingRefusesBadOptions(t *testing.T) {
	good := ServingOptions{NodeName: "n", Client: fake.NewClientset(), CertDir: t.TempDir(), Hostnames: []string{"n"}}
	s, err := NewServing(good)
	require.NoError(t, err)
	_, err = s.GetCertificate(nil)
	require.ErrorIs(t, err, ErrNoServingCertificate)
	s.Close()
	for name, breakIt := range map[string]func(*ServingOptions){
		"NodeName": func(o *ServingOptions) { o.NodeName = "" },
		"Client":   func(o *ServingOptions) { o.Client = nil },
		"CertDir":  func(o *ServingOptions) { o.CertDir = "" },
		"names":    func(o *ServingOptions) { o.Hostnames = nil },
	} {
		o := good
		breakIt(&o)
		_, err := NewServing(o)
		require.ErrorContains(t, err, "bootstrap: ServingOptions", name)
	}
}
