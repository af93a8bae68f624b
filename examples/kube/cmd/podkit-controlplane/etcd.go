package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/podkit/podkit/examples/kube/internal/controlplane"
)

// etcdStartTimeout bounds the wait for the embedded etcd to be ready.
const etcdStartTimeout = time.Minute

// startEtcd starts a single-member etcd in this process, keeping its data
// in files.EtcdDir, and returns it with the URL its clients use. Fsync is
// off: the data lives as long as the cluster and no longer.
//
// Both its client and its peer URL take only TLS connections with a client
// certificate of the etcd CA, which signs nothing but etcd's own
// certificate and the API server's etcd client: no pod, node or user of the
// cluster can talk to it, even from this machine's loopback.
func startEtcd(ctx context.Context, files controlplane.Files) (*embed.Etcd, string, error) {
	tlsInfo := transport.TLSInfo{
		CertFile:       files.EtcdCert,
		KeyFile:        files.EtcdKey,
		TrustedCAFile:  files.EtcdCACert,
		ClientCertAuth: true,
	}
	cfg := embed.NewConfig()
	cfg.Dir = files.EtcdDir
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ClientTLSInfo = tlsInfo
	cfg.PeerTLSInfo = tlsInfo
	// Port 0 lets the kernel choose: no other process can take the ports
	// between choosing and listening. The client URL is read back from the
	// listener; the peer URL is never dialled (one member).
	local := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("starting etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(etcdStartTimeout):
		e.Close()
		return nil, "", fmt.Errorf("etcd was not ready after %v", etcdStartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, "", ctx.Err()
	}
	addr := e.Clients[0].Addr().(*net.TCPAddr)
	return e, "https://" + net.JoinHostPort(addr.IP.String(), strconv.Itoa(addr.Port)), nil
}
