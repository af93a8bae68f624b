// Package csrapprover approves the serving certificate requests of a
// cluster's nodes (signer kubernetes.io/kubelet-serving), which
// kube-controller-manager signs once approved but never approves itself:
// the small approver podkit-cluster and clustertest run so that nodes with
// --rotate-server-certificates (package bootstrap) get their certificates.
//
// A CSR is approved when Check passes: it is requested by
// system:node:<name> in group system:nodes for that same subject, for
// server use only, and names only addresses the Node <name> publishes
// (InternalIP/ExternalIP for IPs; Hostname, InternalDNS or ExternalDNS for
// DNS names). Under the NodeRestriction admission plugin a node may write
// only its own Node, so no node can get a certificate for another's
// address. A CSR that does not pass yet (the Node not registered, or not
// publishing the address yet) is checked again with backoff; nothing is
// denied.
//
// # Usage
//
//  1. Give an Approver an administrator's clientset (or one allowed to
//     read CSRs and Nodes and approve for the kubelet-serving signer).
//  2. Run it as one of the cluster's loops.
//
// # Concurrency
//
// Run starts an informer and one worker and returns once both have; Check
// is a pure function.
//
// # Limits
//
// It trusts the Node's addresses, as the community's kubelet-csr-approver
// does by default; it does not resolve DNS names or check IPs against
// allowed ranges.
package csrapprover
