package action

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// grpcServer serves the health service (unless withHealth is false) on a
// free port of 127.0.0.1 until the test ends, and returns the port.
func grpcServer(t *testing.T, withHealth bool, opts ...grpc.ServerOption) (int32, *health.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer(opts...)
	hs := health.NewServer()
	if withHealth {
		healthpb.RegisterHealthServer(s, hs)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return int32(l.Addr().(*net.TCPAddr).Port), hs
}

func TestGRPC(t *testing.T) {
	port, hs := grpcServer(t, true)
	hs.SetServingStatus("ready", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("sick", healthpb.HealthCheckResponse_NOT_SERVING)
	svc := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		service *string
		outcome Outcome
		output  string
	}{
		{"server as a whole", nil, Success, "service healthy"},
		{"serving service", svc("ready"), Success, "service healthy"},
		{"not serving", svc("sick"), Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", svc("nope"), Failure, "error: health rpc probe failed: rpc error: code = NotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := GRPC(context.Background(), &v1.GRPCAction{Port: port, Service: tc.service}, "127.0.0.1", time.Second)
			assert.Equal(t, tc.outcome, res.Outcome)
			assert.Contains(t, res.Output, tc.output)
		})
	}
}

func TestGRPCWithoutHealthService(t *testing.T) {
	port, _ := grpcServer(t, false)
	res := GRPC(context.Background(), &v1.GRPCAction{Port: port}, "127.0.0.1", time.Second)
	assert.Equal(t, Failure, res.Outcome)
	assert.Contains(t, res.Output, "error: this server does not implement the grpc health protocol (grpc.health.v1.Health)")
}

func TestGRPCClosedPortFailsAtOnce(t *testing.T) {
	res := GRPC(context.Background(), &v1.GRPCAction{Port: int32(closedPort(t))}, "127.0.0.1", time.Second)
	assert.Equal(t, Failure, res.Outcome)
	assert.Contains(t, res.Output, "connection refused")
}

func TestGRPCTimeoutMessage(t *testing.T) {
	port, _ := grpcServer(t, true)
	clk := clocktesting.NewFakeClock(t0)
	ctx, cancel := WithTimeout(context.Background(), clk, time.Second)
	defer cancel()
	clk.Step(time.Second)
	res := GRPC(ctx, &v1.GRPCAction{Port: port}, "127.0.0.1", time.Second)
	assert.Equal(t, Failure, res.Outcome)
	assert.Equal(t, "timeout: health rpc did not complete within 1s", res.Output)
}

func TestGRPCTLSMode(t *testing.T) {
	port, _ := grpcServer(t, true, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})))
	res := GRPC(context.Background(), &v1.GRPCAction{Port: port}, "127.0.0.1", time.Second)
	assert.Equal(t, Failure, res.Outcome, "plaintext against a TLS server fails")
	mode := v1.GRPCProbeModeTLS
	res = GRPC(context.Background(), &v1.GRPCAction{Port: port, Mode: &mode}, "127.0.0.1", time.Second)
	assert.Equal(t, Success, res.Outcome, res.Output)
}

func TestGRPCCannotBeMade(t *testing.T) {
	assert.Equal(t, Unknown, GRPC(context.Background(), &v1.GRPCAction{Port: 80}, "", time.Second).Outcome)
	assert.Equal(t, Unknown, GRPC(context.Background(), &v1.GRPCAction{Port: 0}, "127.0.0.1", time.Second).Outcome)
	assert.Equal(t, Unknown, GRPC(context.Background(), nil, "127.0.0.1", time.Second).Outcome)
}

// selfSigned returns a throwaway certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "probe-test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
