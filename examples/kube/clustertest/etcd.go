package clustertest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdStartTimeout bounds the wait for the embedded etcd to be ready.
const etcdStartTimeout = time.Minute

// startEtcd starts a single-member etcd in this process, keeping its data
// in dir, and returns it with the URL its clients use. Fsync is off: the
// data lives as long as the cluster and no longer.
func startEtcd(ctx context.Context, dir string) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Port 0 lets the kernel choose: no other process can take the ports
	// between choosing and listening. The client URL is read back from the
	// listener; the peer URL is never dialled (one member).
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("clustertest: starting etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("clustertest: etcd failed while starting: %w", err)
	case <-time.After(etcdStartTimeout):
		e.Close()
		return nil, "", fmt.Errorf("clustertest: etcd was not ready after %v", etcdStartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, "", ctx.Err()
	}
	addr := e.Clients[0].Addr().(*net.TCPAddr)
	return e, "http://" + net.JoinHostPort(addr.IP.String(), strconv.Itoa(addr.Port)), nil
}
