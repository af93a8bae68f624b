// Package bootstrap gives a podkit agent the certificates a kubelet gets
// when it joins a cluster: its client certificate by TLS bootstrap, and
// optionally its kubelet API's serving certificate, both from the cluster's
// signers and both rotated before they expire by client-go's certificate
// manager (k8s.io/client-go/util/certificate), not by code of its own.
//
//   - Client: with a bootstrap kubeconfig (a bootstrap token, as kubeadm
//     join and k3s agents use), a CSR to the
//     kubernetes.io/kube-apiserver-client-kubelet signer for
//     system:node:<name> in group system:nodes. kube-controller-manager's
//     csrapproving controller approves it when the requester may create
//     certificatesigningrequests/nodeclient (kubeadm binds the bootstrap
//     tokens' group to that role; renewals by the node itself need
//     .../selfnodeclient, bound to system:nodes), and its csrsigning
//     controller signs it with --cluster-signing-cert-file. The pair is
//     kept in the certificate directory (kubelet-client-current.pem, 0600,
//     in a 0700 directory), reused by a restarted agent while valid, and
//     renewed with the node's own identity at 70 to 90% of its lifetime;
//     clients of Client.Config reload it from the file and close the
//     connections made with the old one.
//   - Serving: a CSR to the kubernetes.io/kubelet-serving signer naming
//     the node's IP and hostname (the kubelet's
//     --rotate-server-certificates). kube-controller-manager signs it but
//     never approves it: something else must. Package csrapprover runs an
//     approver that checks the CSR's names against the Node's published
//     addresses (clustertest and podkit-cluster run it); on kubeadm
//     clusters kubelet-csr-approver or an administrator's `kubectl
//     certificate approve` does. Until a certificate is issued the kubelet
//     API refuses TLS handshakes, as a kubelet does.
//
// # Usage
//
//  1. NewClient with the node name, the bootstrap kubeconfig and a
//     certificate directory in the agent's state directory.
//  2. Run it on a goroutine of its own; WaitForCertificate; build the
//     agent's clientset from Config.
//  3. For a signed serving certificate, NewServing with that clientset and
//     the node's address, Run it, and give GetCertificate to the kubelet
//     API (agent.KubeletAPIConfig.GetCertificate).
//  4. Cancel the contexts of the Runs when the agent stops.
//
// # Concurrency
//
// Every method is safe for concurrent use. New* start nothing; Run starts
// the certificate manager and returns once its context ends and the
// manager is told to stop (its goroutines, client-go's, end as soon as they
// see it).
//
// # Where it differs from the kubelet
//
// The kubelet can also bootstrap without rotation (a one-time CSR) and
// keep using an existing --kubeconfig; here a bootstrap always goes with
// rotation, and the kubeconfig given is written for the node's identity
// (for tools) rather than read. Keys are ECDSA P-256, client-go's
// manager's default.
package bootstrap
