package clustertest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
)

// The bootstrap RBAC a kubeadm cluster has, which Start creates: the
// group of bootstrap tokens may create CSRs and have kube-controller-
// manager approve its nodes' client CSRs, and nodes may have the renewals
// of their own client certificates approved.
var bootstrapBindings = []struct{ name, role, group string }{
	{"podkit:node-bootstrapper", "system:node-bootstrapper", bootstrapapi.BootstrapDefaultGroup},
	{"podkit:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", bootstrapapi.BootstrapDefaultGroup},
	{"podkit:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
}

// createBootstrapRBAC creates bootstrapBindings.
func (c *Cluster) createBootstrapRBAC(ctx context.Context) error {
	for _, b := range bootstrapBindings {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: b.group}},
		}
		_, err := c.admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("clustertest: the bootstrap RBAC binding %s: %w", b.name, err)
		}
	}
	return nil
}

// The alphabet and lengths of a bootstrap token's ID and secret.
const (
	tokenAlphabet   = "abcdefghijklmnopqrstuvwxyz0123456789"
	tokenIDLen      = 6
	tokenSecretLen  = 16
	minBootstrapTTL = time.Minute
)

// BootstrapToken is a bootstrap token of the cluster: "<ID>.<Secret>" is
// what a joining node presents (kubeadm join --token); it authenticates as
// system:bootstrap:<ID> in group system:bootstrappers until it expires,
// and the token cleaner deletes it then.
type BootstrapToken struct {
	ID, Secret string
	// Expires is when the token stops authenticating.
	Expires time.Time
}

// String returns the token as a node presents it.
func (t BootstrapToken) String() string { return t.ID + "." + t.Secret }

// CreateBootstrapToken creates a bootstrap token valid for ttl (at least a
// minute): the kube-system Secret bootstrap-token-<id> that the API
// server's bootstrap token authenticator reads. With it a node joins the
// cluster as a kubelet does (TLS bootstrap): its client CSR is approved
// and signed by the controller manager, its serving CSR by the cluster's
// approver (package csrapprover) and the controller manager.
func (c *Cluster) CreateBootstrapToken(ctx context.Context, ttl time.Duration) (BootstrapToken, error) {
	if ttl < minBootstrapTTL {
		return BootstrapToken{}, fmt.Errorf("clustertest: CreateBootstrapToken: ttl %v is below %v", ttl, minBootstrapTTL)
	}
	id, err := randomString(tokenIDLen)
	if err != nil {
		return BootstrapToken{}, err
	}
	secret, err := randomString(tokenSecretLen)
	if err != nil {
		return BootstrapToken{}, err
	}
	tok := BootstrapToken{ID: id, Secret: secret, Expires: time.Now().Add(ttl).Truncate(time.Second)}
	s := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.BootstrapTokenSecretPrefix + id, Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		StringData: map[string]string{
			bootstrapapi.BootstrapTokenIDKey:               id,
			bootstrapapi.BootstrapTokenSecretKey:           secret,
			bootstrapapi.BootstrapTokenExpirationKey:       tok.Expires.UTC().Format(time.RFC3339),
			bootstrapapi.BootstrapTokenUsageAuthentication: "true",
			bootstrapapi.BootstrapTokenUsageSigningKey:     "true",
			bootstrapapi.BootstrapTokenDescriptionKey:      "podkit node join",
		},
	}
	if _, err := c.admin.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return BootstrapToken{}, fmt.Errorf("clustertest: creating a bootstrap token: %w", err)
	}
	return tok, nil
}

// WriteBootstrapKubeconfig writes at path (0600) the bootstrap kubeconfig
// of tok: the API server, its CA, and the token (a kubelet's
// --bootstrap-kubeconfig, podkit-agent's too).
func (c *Cluster) WriteBootstrapKubeconfig(path string, tok BootstrapToken) error {
	if tok.ID == "" || tok.Secret == "" {
		return errors.New("clustertest: WriteBootstrapKubeconfig: an empty token")
	}
	cfg := rest.AnonymousClientConfig(c.adminConfig)
	cfg.BearerToken = tok.String()
	return WriteKubeconfig(path, cfg)
}

// randomString returns n characters of tokenAlphabet.
func randomString(n int) (string, error) {
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(tokenAlphabet))))
		if err != nil {
			return "", fmt.Errorf("clustertest: a random token: %w", err)
		}
		b[i] = tokenAlphabet[k.Int64()]
	}
	return string(b), nil
}
