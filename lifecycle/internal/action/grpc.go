package action

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
)

// GRPC runs a grpc action: the standard health check
// (grpc.health.v1.Health/Check) for the action's service name against
// host:port, in plaintext, or in TLS without certificate verification when
// the action's mode is TLS. Success when the service answers SERVING;
// Failure otherwise, with the kubelet's messages (another status, a
// server without the health service, a timeout — timeout is only for the
// message, ctx ends the call — or any other error); Unknown when there is
// no host. It never waits for a connection: a closed port fails at once.
func GRPC(ctx context.Context, g *v1.GRPCAction, host string, timeout time.Duration) Result {
	if g == nil {
		return unknown(fmt.Errorf("no grpc action"))
	}
	if host == "" {
		return unknown(fmt.Errorf("no host to connect to: the pod has no IP"))
	}
	if g.Port < 1 || g.Port > 65535 {
		return unknown(fmt.Errorf("invalid port number: %d", g.Port))
	}
	creds := insecure.NewCredentials()
	if g.Mode != nil && *g.Mode == v1.GRPCProbeModeTLS {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the kubelet's rule: probes do not verify
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithUserAgent("kube-probe/"+kubeVersion),
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer().DialContext(ctx, "tcp", addr)
		}),
	)
	if err != nil {
		return failure(fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err))
	}
	defer func() { _ = conn.Close() }()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		if TimedOut(ctx) {
			return failure(fmt.Sprintf("timeout: health rpc did not complete within %v", timeout))
		}
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented {
			return failure(fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message()))
		}
		return failure(fmt.Sprintf("error: health rpc probe failed: %+v", err))
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return failure(fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()))
	}
	return Result{Outcome: Success, Output: "service healthy"}
}
