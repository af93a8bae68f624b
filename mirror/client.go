package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Errors a MirrorPodClient returns for requests it refuses. They are wrapped
// with the pod's name; test with errors.Is. None of them is worth retrying
// unchanged.
var (
	// ErrNotStaticPod: a mirror was asked for a pod that is not a static
	// pod, is itself a mirror pod, or has no ConfigHashAnnotationKey.
	ErrNotStaticPod = errors.New("mirror: not a static pod")
	// ErrNotMirrorPod: the object to delete, or the object found where a
	// mirror was to be created, is not a mirror pod. It was left alone.
	ErrNotMirrorPod = errors.New("mirror: not a mirror pod")
	// ErrHashMismatch: a mirror pod with another hash already exists (a
	// stale mirror). Delete it, passing its UID, and create again.
	ErrHashMismatch = errors.New("mirror: mirror pod hash mismatch")
)

// MirrorPodClient creates and deletes mirror pods in the API server. Code
// that needs one (housekeeping, a pod syncer) should depend on this interface;
// Client is the implementation and mirrortest.FakeClient the fake.
//
// Implementations must be safe for concurrent use.
type MirrorPodClient interface {
	// CreateMirrorPod makes sure the API server holds a mirror of the
	// static pod. It does not keep or modify pod. A nil error means a
	// mirror with pod's hash exists.
	CreateMirrorPod(ctx context.Context, pod *v1.Pod) error
	// DeleteMirrorPod deletes the mirror pod with the given full name
	// ("name_namespace"), and only if its UID is *uid when uid is not nil.
	// It reports whether this call deleted it. A pod that does not exist
	// or has another UID gives (false, nil).
	DeleteMirrorPod(ctx context.Context, podFullName string, uid *types.UID) (bool, error)
}

// PodAPI is the part of the API server a Client needs: create, read and
// delete one pod. It follows client-go's typed pods client, with the
// namespace passed on each call instead of bound in advance, so a clientset
// fits with the adapter shown on PodAPIFuncs.
//
// Errors must be API status errors (k8s.io/apimachinery/pkg/api/errors) so
// that AlreadyExists, NotFound and Conflict can be recognised; any other
// error is passed on. On error the returned pod is ignored. Implementations
// must be safe for concurrent use and must not keep or modify the pod given
// to Create.
type PodAPI interface {
	// Create creates pod in namespace and returns the stored object.
	Create(ctx context.Context, namespace string, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	// Get returns the pod namespace/name.
	Get(ctx context.Context, namespace, name string, opts metav1.GetOptions) (*v1.Pod, error)
	// Delete deletes the pod namespace/name, honouring opts.Preconditions
	// (a mismatch is a Conflict) and opts.GracePeriodSeconds.
	Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// PodAPIFuncs adapts three functions to a PodAPI. A nil field makes that
// call fail with an error. Over a client-go clientset cs:
//
//	api := mirror.PodAPIFuncs{
//		CreateFunc: func(ctx context.Context, ns string, pod *v1.Pod, o metav1.CreateOptions) (*v1.Pod, error) {
//			return cs.CoreV1().Pods(ns).Create(ctx, pod, o)
//		},
//		GetFunc: func(ctx context.Context, ns, name string, o metav1.GetOptions) (*v1.Pod, error) {
//			return cs.CoreV1().Pods(ns).Get(ctx, name, o)
//		},
//		DeleteFunc: func(ctx context.Context, ns, name string, o metav1.DeleteOptions) error {
//			return cs.CoreV1().Pods(ns).Delete(ctx, name, o)
//		},
//	}
type PodAPIFuncs struct {
	// CreateFunc implements PodAPI.Create.
	CreateFunc func(ctx context.Context, namespace string, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	// GetFunc implements PodAPI.Get.
	GetFunc func(ctx context.Context, namespace, name string, opts metav1.GetOptions) (*v1.Pod, error)
	// DeleteFunc implements PodAPI.Delete.
	DeleteFunc func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// Create calls f.CreateFunc, or fails if it is nil.
func (f PodAPIFuncs) Create(ctx context.Context, namespace string, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error) {
	if f.CreateFunc == nil {
		return nil, errors.New("mirror: PodAPIFuncs.CreateFunc is nil")
	}
	return f.CreateFunc(ctx, namespace, pod, opts)
}

// Get calls f.GetFunc, or fails if it is nil.
func (f PodAPIFuncs) Get(ctx context.Context, namespace, name string, opts metav1.GetOptions) (*v1.Pod, error) {
	if f.GetFunc == nil {
		return nil, errors.New("mirror: PodAPIFuncs.GetFunc is nil")
	}
	return f.GetFunc(ctx, namespace, name, opts)
}

// Delete calls f.DeleteFunc, or fails if it is nil.
func (f PodAPIFuncs) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if f.DeleteFunc == nil {
		return errors.New("mirror: PodAPIFuncs.DeleteFunc is nil")
	}
	return f.DeleteFunc(ctx, namespace, name, opts)
}

var (
	_ PodAPI          = PodAPIFuncs{}
	_ MirrorPodClient = (*Client)(nil)
)

// Client is the MirrorPodClient over a PodAPI. Build it with NewClient; it
// keeps no state besides its configuration, is safe for concurrent use, and
// holds no lock while it calls the PodAPI or the node UID function.
type Client struct {
	api      PodAPI
	nodeName string
	nodeUID  func(context.Context) (types.UID, error)
	logger   logr.Logger
	hasLog   bool
}

// ClientOptions configure a Client. With an API server (a non-nil PodAPI)
// NodeName and NodeUID are required; without one (standalone mode) every
// field may be left empty.
type ClientOptions struct {
	// NodeName is the node the agent runs as: the name of the Node object
	// every mirror pod's controller owner reference names. Required with a
	// PodAPI.
	NodeName string
	// NodeUID returns the UID of the Node object. It is called on every
	// CreateMirrorPod (possibly concurrently), because the owner reference
	// must name it and the Node may be registered, or re-created, after the
	// agent starts; ctx is the call's. An error, or an empty UID, fails
	// that create and sends nothing. Required with a PodAPI.
	NodeUID func(ctx context.Context) (types.UID, error)
	// Logger receives the Client's per-pod messages, at V(4). Defaults to
	// the logger in each call's context (logr.FromContextOrDiscard), which
	// discards when there is none.
	Logger logr.Logger
}

// NewClient returns a Client that manages the mirror pods of node
// opts.NodeName through api. It starts nothing and calls nothing.
//
// With a nil api the Client runs in standalone mode, as a kubelet without an
// API server does: after checking its arguments, CreateMirrorPod does nothing
// and returns nil, and DeleteMirrorPod returns (false, nil).
//
// It returns an error, prefixed "mirror: ", when api is set and
// opts.NodeName is empty or opts.NodeUID is nil. NewClient returns the
// concrete type so callers get its documentation; depend on MirrorPodClient
// where a fake should fit.
func NewClient(api PodAPI, opts ClientOptions) (*Client, error) {
	if api != nil {
		switch {
		case opts.NodeName == "":
			return nil, errors.New("mirror: ClientOptions.NodeName is empty; mirror pods must name their Node")
		case opts.NodeUID == nil:
			return nil, fmt.Errorf("mirror: ClientOptions.NodeUID is nil; mirror pods of node %q must name its UID", opts.NodeName)
		}
	}
	return &Client{
		api:      api,
		nodeName: opts.NodeName,
		nodeUID:  opts.NodeUID,
		logger:   opts.Logger,
		hasLog:   opts.Logger.GetSink() != nil,
	}, nil
}

func (c *Client) log(ctx context.Context) logr.Logger {
	if c.hasLog {
		return c.logger
	}
	return logr.FromContextOrDiscard(ctx)
}

// ValidateStaticPod reports why a mirror pod may not be made for pod, or nil
// if it may: pod must be static (IsStaticPod), must not itself be a mirror
// pod, and must carry a non-empty ConfigHashAnnotationKey, which the mirror
// will repeat. Errors wrap ErrNotStaticPod.
func ValidateStaticPod(pod *v1.Pod) error {
	switch {
	case pod == nil:
		return fmt.Errorf("%w: nil pod", ErrNotStaticPod)
	case IsMirrorPod(pod):
		return fmt.Errorf("%w: %s is itself a mirror pod", ErrNotStaticPod, PodFullName(pod))
	case !IsStaticPod(pod):
		source, _ := PodSource(pod)
		return fmt.Errorf("%w: %s has source %q", ErrNotStaticPod, PodFullName(pod), source)
	case pod.Annotations[ConfigHashAnnotationKey] == "":
		return fmt.Errorf("%w: %s has no %s annotation", ErrNotStaticPod, PodFullName(pod), ConfigHashAnnotationKey)
	}
	return nil
}

// CreateMirrorPod creates the mirror of the static pod in the API server.
//
// The mirror is a deep copy of pod with ConfigMirrorAnnotationKey set to
// pod's ConfigHashAnnotationKey, the owner references replaced by exactly one
// controller reference to the Node (ClientOptions.NodeName and the UID
// ClientOptions.NodeUID returns), and UID and resourceVersion cleared, since
// the API server assigns them. pod itself is neither kept nor modified.
//
// If a pod with that name already exists, it is read back: a mirror with the
// same hash means the work is done and nil is returned; a mirror with another
// hash gives an error wrapping ErrHashMismatch that names both hashes; an
// object that is not a mirror pod gives an error wrapping ErrNotMirrorPod. If
// it was deleted before it could be read, the create is tried again, up to
// three attempts in all, after which the NotFound is returned (wrapped) and
// the caller may retry later.
//
// Errors: pod fails ValidateStaticPod (wraps ErrNotStaticPod, nothing is
// sent); ClientOptions.NodeUID fails or returns an empty UID (nothing is
// sent); otherwise the PodAPI's error, wrapped. ctx is passed to NodeUID
// and to the PodAPI.
func (c *Client) CreateMirrorPod(ctx context.Context, pod *v1.Pod) error {
	if err := ValidateStaticPod(pod); err != nil {
		return err
	}
	if c.api == nil {
		return nil
	}
	fullName := PodFullName(pod)
	nodeUID, err := c.getNodeUID(ctx)
	if err != nil {
		return fmt.Errorf("mirror: creating mirror pod %s: %w", fullName, err)
	}

	hash := pod.Annotations[ConfigHashAnnotationKey]
	mirror := pod.DeepCopy()
	mirror.UID = ""
	mirror.ResourceVersion = ""
	mirror.Annotations[ConfigMirrorAnnotationKey] = hash
	isController := true
	mirror.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1.SchemeGroupVersion.String(),
		Kind:       "Node",
		Name:       c.nodeName,
		UID:        nodeUID,
		Controller: &isController,
	}}

	logger := c.log(ctx)
	for attempt := 1; ; attempt++ {
		logger.V(4).Info("Creating mirror pod", "pod", fullName, "hash", hash, "attempt", attempt)
		_, err = c.api.Create(ctx, mirror.Namespace, mirror, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("mirror: creating mirror pod %s: %w", fullName, err)
		}

		// The object a failed create returns is empty, so read the one
		// that is there to learn whether it is already our mirror
		// (decision D5).
		existing, getErr := c.api.Get(ctx, mirror.Namespace, mirror.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) && attempt < createAttempts {
			// Deleted between the two calls: the name is free again.
			continue
		}
		if getErr != nil {
			return fmt.Errorf("mirror: creating mirror pod %s: it already exists but reading it failed: %w", fullName, getErr)
		}
		existingHash, isMirror := existing.Annotations[ConfigMirrorAnnotationKey]
		switch {
		case !isMirror:
			return fmt.Errorf("%w: creating mirror pod %s: a pod that is not a mirror pod already has that name",
				ErrNotMirrorPod, fullName)
		case existingHash != hash:
			return fmt.Errorf("%w: creating mirror pod %s: the existing mirror (UID %s) has hash %q, the static pod has hash %q",
				ErrHashMismatch, fullName, existing.UID, existingHash, hash)
		}
		return nil
	}
}

// createAttempts bounds how often CreateMirrorPod creates again when the pod
// that made the create fail with AlreadyExists is gone by the time it is read.
const createAttempts = 3

func (c *Client) getNodeUID(ctx context.Context) (types.UID, error) {
	uid, err := c.nodeUID(ctx)
	if err != nil {
		return "", fmt.Errorf("getting the UID of node %q: %w", c.nodeName, err)
	}
	if uid == "" {
		return "", fmt.Errorf("node %q has no UID", c.nodeName)
	}
	return uid, nil
}

// DeleteMirrorPod deletes the mirror pod podFullName ("name_namespace") with a
// grace period of 0, and reports whether this call deleted it.
//
// It first reads the object and deletes it only if it is a mirror pod; the
// delete carries a UID precondition for the object it read (which is *uid
// when uid is given), so a pod re-created under the same name in between is
// never deleted by mistake. The API server does not let the mirror
// annotation be added or removed on an existing pod, so the UID is enough.
//
// Under the Node authorizer a node may read only the pods the authorizer
// knows are bound to it, so the read of a mirror that is already gone (or
// not yet known to the authorizer) is Forbidden, not NotFound. When uid is
// given, a Forbidden read is therefore not the end: the delete is sent with
// the precondition *uid alone, trusting the caller that *uid is the UID of
// a mirror pod it saw (a UID never changes owner), and a NotFound answer is
// (false, nil) as above. Without uid a Forbidden read is returned as an
// error: nothing tells what the name holds.
//
// Results:
//   - deleted: (true, nil);
//   - no such pod, or its UID is not *uid, or it vanished or changed before
//     the delete (NotFound or Conflict): (false, nil) — nothing to do;
//   - the object is not a mirror pod: (false, error wrapping ErrNotMirrorPod),
//     and it is left alone;
//   - a malformed full name: (false, error wrapping ErrInvalidFullName),
//     with no API call;
//   - any other API error: (false, that error wrapped); the kubelet only
//     logs these, podkit returns them so the caller can retry or report.
//
// With a nil PodAPI (standalone mode) it returns (false, nil) once the name
// parses. ctx is passed to the PodAPI.
func (c *Client) DeleteMirrorPod(ctx context.Context, podFullName string, uid *types.UID) (bool, error) {
	name, namespace, err := ParsePodFullName(podFullName)
	if err != nil {
		return false, err
	}
	if c.api == nil {
		return false, nil
	}
	logger := c.log(ctx)

	var preconditionUID types.UID
	current, err := c.api.Get(ctx, namespace, name, metav1.GetOptions{})
	switch {
	case err == nil:
		if uid != nil && current.UID != *uid {
			logger.V(4).Info("Mirror pod to delete has another UID, not deleting", "pod", podFullName,
				"wantUID", *uid, "foundUID", current.UID)
			return false, nil
		}
		if !IsMirrorPod(current) {
			return false, fmt.Errorf("%w: refusing to delete %s (UID %s)", ErrNotMirrorPod, podFullName, current.UID)
		}
		preconditionUID = current.UID
	case apierrors.IsNotFound(err):
		logger.V(4).Info("Mirror pod to delete is already gone", "pod", podFullName)
		return false, nil
	case apierrors.IsForbidden(err) && uid != nil:
		logger.V(4).Info("Mirror pod to delete cannot be read; deleting it by its UID", "pod", podFullName, "podUID", *uid, "err", err.Error())
		preconditionUID = *uid
	default:
		return false, fmt.Errorf("mirror: deleting mirror pod %s: reading it: %w", podFullName, err)
	}

	logger.V(4).Info("Deleting mirror pod", "pod", podFullName, "podUID", preconditionUID)
	grace := int64(0)
	err = c.api.Delete(ctx, namespace, name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &preconditionUID},
	})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		logger.V(4).Info("Mirror pod changed before it could be deleted", "pod", podFullName, "err", err.Error())
		return false, nil
	default:
		return false, fmt.Errorf("mirror: deleting mirror pod %s: %w", podFullName, err)
	}
}
