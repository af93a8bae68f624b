package csrapprover

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// ReasonAutoApproved is the reason of the Approved condition the approver
// sets.
const ReasonAutoApproved = "PodkitServingApprove"

// The retry bounds of a CSR not approvable yet (its Node not registered,
// or not publishing the addresses the CSR names yet).
const (
	retryInterval    = 500 * time.Millisecond
	maxRetryInterval = 30 * time.Second
)

// Approver approves the kubelet serving CSRs (signer
// kubernetes.io/kubelet-serving) that Check finds right, as a cluster's
// serving-CSR approver does: kube-controller-manager signs serving CSRs
// once approved but never approves them itself. A CSR that does not pass
// yet because its Node does not publish the addresses it names (an agent
// asks for its certificate before publishing its endpoint) is checked
// again with backoff, up to every 30 seconds, until it passes, is
// approved or denied by someone else, or is deleted. Nothing is ever
// denied: a wrong CSR stays pending for an administrator to look at, and
// the reason is logged.
//
// The zero value is not usable: set Client. Run it once.
type Approver struct {
	// Client reads CSRs and Nodes and approves CSRs (the
	// certificatesigningrequests/approval subresource and approve on the
	// signer; an administrator's client may).
	Client kubernetes.Interface
	// Logger receives each approval (level 0) and each refusal (level 2).
	Logger logr.Logger

	mu  sync.Mutex
	ran bool
}

// Run approves serving CSRs until ctx ends, then returns nil once its
// goroutines have. It may be called once.
func (a *Approver) Run(ctx context.Context) error {
	if a.Client == nil {
		return errors.New("csrapprover: Approver needs a Client")
	}
	a.mu.Lock()
	if a.ran {
		a.mu.Unlock()
		return errors.New("csrapprover: Approver.Run called twice")
	}
	a.ran = true
	a.mu.Unlock()

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryInterval, maxRetryInterval))
	csrs := a.Client.CertificatesV1().CertificateSigningRequests()
	logger := a.Logger
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && csr.Spec.SignerName == certificatesv1.KubeletServingSignerName {
			queue.Add(csr.Name)
		}
	}
	store, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger: &logger,
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
				return csrs.List(ctx, options)
			},
			WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
				return csrs.Watch(ctx, options)
			},
		}, a.Client),
		ObjectType: &certificatesv1.CertificateSigningRequest{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
		},
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		controller.RunWithContext(ctx)
	}()
	go func() {
		defer wg.Done()
		for a.processNext(ctx, queue, store) {
		}
	}()
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	return nil
}

func (a *Approver) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], store cache.Store) bool {
	name, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(name)
	obj, exists, _ := store.GetByKey(name)
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !exists || !ok || decided(csr) {
		queue.Forget(name)
		return true
	}
	if err := a.approve(ctx, csr); err != nil {
		if ctx.Err() == nil {
			a.Logger.V(2).Info("Not approving the serving CSR yet", "csr", name, "requester", csr.Spec.Username, "reason", err.Error())
			queue.AddRateLimited(name)
		}
		return true
	}
	queue.Forget(name)
	return true
}

// decided reports whether csr is approved or denied already.
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			return true
		}
	}
	return false
}

// approve checks csr against its Node and approves it.
func (a *Approver) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	nodeName, ok := strings.CutPrefix(csr.Spec.Username, "system:node:")
	if !ok || nodeName == "" {
		return fmt.Errorf("csrapprover: CSR %s: the requester %q is not a node", csr.Name, csr.Spec.Username)
	}
	node, err := a.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("csrapprover: CSR %s: reading its Node: %w", csr.Name, err)
	}
	if err := Check(csr, node); err != nil {
		return err
	}
	approved := csr.DeepCopy()
	approved.Status.Conditions = append(approved.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type:    certificatesv1.CertificateApproved,
		Status:  v1.ConditionTrue,
		Reason:  ReasonAutoApproved,
		Message: "podkit approved the serving certificate of node " + nodeName + ": its names are the Node's addresses",
	})
	_, err = a.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, approved, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil // deleted meanwhile
	case err != nil:
		return fmt.Errorf("csrapprover: approving CSR %s: %w", csr.Name, err)
	}
	a.Logger.Info("Approved a kubelet serving CSR", "csr", csr.Name, "node", nodeName)
	return nil
}

// Check says whether csr is a serving CSR node may get, and why not:
//
//   - the signer is kubernetes.io/kubelet-serving;
//   - the requester is system:node:<node> in group system:nodes, and the
//     request's subject is the same (organization system:nodes only);
//   - the request is well-formed and signed by its key;
//   - the usages are server auth, with digital signature and key
//     encipherment allowed, and nothing else;
//   - it names at least one IP or DNS name, no email address and no URI;
//     every IP is one of the Node's InternalIP or ExternalIP addresses,
//     every DNS name one of its Hostname, InternalDNS or ExternalDNS
//     addresses.
//
// The last rule is what makes a node unable to get a certificate for
// another's address: the NodeRestriction admission plugin lets a node
// write only its own Node.
func Check(csr *certificatesv1.CertificateSigningRequest, node *v1.Node) error {
	if csr == nil || node == nil {
		return errors.New("csrapprover: Check needs a CSR and a Node")
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("csrapprover: CSR %s: "+format, append([]any{csr.Name}, args...)...)
	}
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return fail("signer %q is not %s", csr.Spec.SignerName, certificatesv1.KubeletServingSignerName)
	}
	want := "system:node:" + node.Name
	if csr.Spec.Username != want || !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return fail("requested by %q, not by %s in group system:nodes", csr.Spec.Username, want)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return fail("the request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return fail("parsing the request: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return fail("the request's signature: %v", err)
	}
	if req.Subject.CommonName != want || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		return fail("subject %q is not CN=%s, O=system:nodes", req.Subject.String(), want)
	}
	serverAuth := false
	for _, u := range csr.Spec.Usages {
		switch u {
		case certificatesv1.UsageServerAuth:
			serverAuth = true
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		default:
			return fail("usage %q is not for serving", u)
		}
	}
	if !serverAuth {
		return fail("no server auth usage")
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return fail("names email addresses or URIs")
	}
	if len(req.IPAddresses) == 0 && len(req.DNSNames) == 0 {
		return fail("names no IP and no DNS name")
	}
	for _, ip := range req.IPAddresses {
		if !hasAddress(node, ip.String(), v1.NodeInternalIP, v1.NodeExternalIP) {
			return fail("IP %s is not an address of Node %s (%v)", ip, node.Name, node.Status.Addresses)
		}
	}
	for _, name := range req.DNSNames {
		if !hasAddress(node, name, v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS) {
			return fail("DNS name %s is not an address of Node %s (%v)", name, node.Name, node.Status.Addresses)
		}
	}
	return nil
}

// hasAddress reports whether node publishes value as an address of one of
// types (IPs compared as IPs).
func hasAddress(node *v1.Node, value string, types ...v1.NodeAddressType) bool {
	ip := net.ParseIP(value)
	for _, a := range node.Status.Addresses {
		if !slices.Contains(types, a.Type) {
			continue
		}
		if a.Address == value || (ip != nil && ip.Equal(net.ParseIP(a.Address))) {
			return true
		}
	}
	return false
}
