package podenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podkit/podkit/lifecycle/internal/apiobject"
	"github.com/podkit/podkit/lifecycle/internal/downwardapi"
)

// EnvVar is one variable of a container's environment.
type EnvVar struct {
	Name, Value string
}

// Inputs are what the runtime knows of the pod's and the node's network
// when it builds an environment: the kubelet reads them from the runtime
// and the Node, not from the pod's status.
type Inputs struct {
	// PodIPs are the pod's IPs, the primary first (the node's preferred
	// family): status.podIP reads the first, status.podIPs all of them,
	// comma-separated. For a pod on the host's network, the host's IPs.
	// Empty: both read as "".
	PodIPs []string
	// HostIPs are the node's IPs, the primary first: status.hostIP reads
	// the first, status.hostIPs all of them. Empty: a variable reading
	// them is a ConfigError ("host IP unknown"), as on a kubelet that does
	// not know its node's address yet.
	HostIPs []string
}

// Reasons of the events a Builder records (on the pod).
const (
	// ReasonInvalidEnvVarNames (Warning): keys of an envFrom source were
	// skipped because, with the prefix, they are not valid environment
	// variable names (printable ASCII other than '='). Objects from the
	// API server never have such keys; objects from elsewhere (files) may.
	// The reason and message are those the kubelet used while it checked
	// names itself.
	ReasonInvalidEnvVarNames = "InvalidEnvironmentVariableNames"
)

// Build returns container's environment as the kubelet builds it, in this
// order of precedence (a later rule overrides an earlier one for the same
// name):
//
//  1. the keys of each envFrom source (a config map's data, a secret's
//     data), in the order of envFrom, each with the source's prefix; keys
//     that are not valid names are skipped with an event;
//  2. each env entry in order: value, with $(NAME) references expanded
//     against the variables defined so far and the service variables; or
//     valueFrom: fieldRef, resourceFieldRef, configMapKeyRef,
//     secretKeyRef, fileKeyRef;
//  3. the service variables (Options.ServiceEnv) not defined above.
//
// A variable is listed where its name first appears, with its last value;
// envFrom keys come in key order. An optional reference to a missing
// object or key defines nothing. pod and container are read, never
// modified; container is the one to run (a container, init container or
// ephemeral container of pod).
//
// The runtime calls Build from its hook (SyncPod), before it creates the
// container, for any pod, concurrently. The error is a *ConfigError when
// the environment cannot be built now (the container waits with
// ReasonCreateContainerConfigError and is retried at the next sync), or a
// plain error for a nil pod or container.
func (b *Builder) Build(ctx context.Context, pod *v1.Pod, container *v1.Container, in Inputs) ([]EnvVar, error) {
	if pod == nil || container == nil {
		return nil, errors.New("podenv: Build needs a pod and a container")
	}
	s := &build{
		b: b, ctx: ctx, pod: pod, c: container, in: in,
		values:     map[string]string{},
		secrets:    map[string]*v1.Secret{},
		configMaps: map[string]*v1.ConfigMap{},
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	out := make([]EnvVar, 0, len(s.names)+len(s.service))
	for _, n := range s.names {
		out = append(out, EnvVar{Name: n, Value: s.values[n]})
	}
	for _, n := range s.serviceNames {
		if _, defined := s.values[n]; !defined {
			out = append(out, EnvVar{Name: n, Value: s.service[n]})
		}
	}
	return out, nil
}

// build is the state of one Build call.
type build struct {
	b   *Builder
	ctx context.Context
	pod *v1.Pod
	c   *v1.Container
	in  Inputs

	// names are the defined variables in the order they first appeared;
	// values holds each one's current value; size counts the bytes of
	// names and values (2 more a variable) of values and service, which
	// never exceeds b.maxBytes.
	names  []string
	values map[string]string
	size   int
	// service are the service variables, serviceNames their names sorted.
	service      map[string]string
	serviceNames []string

	// secrets and configMaps hold the objects read so far, by name; nil
	// for one that does not exist.
	secrets    map[string]*v1.Secret
	configMaps map[string]*v1.ConfigMap

	allocatable     v1.ResourceList
	readAllocatable bool
}

func (s *build) run() error {
	if err := s.readServiceEnv(); err != nil {
		return err
	}
	for i := range s.c.EnvFrom {
		if err := s.envFrom(i, &s.c.EnvFrom[i]); err != nil {
			return err
		}
	}
	for i := range s.c.Env {
		e := &s.c.Env[i]
		if errs := validation.IsRelaxedEnvVarName(e.Name); len(errs) > 0 {
			return s.errorf("invalid environment variable name %q: %s", e.Name, strings.Join(errs, "; "))
		}
		value, defined, err := s.value(e)
		if err != nil {
			return err
		}
		if defined {
			if err := s.set(e.Name, value); err != nil {
				return err
			}
		}
	}
	return nil
}

// set defines name as value, within the size bound.
func (s *build) set(name, value string) error {
	if strings.IndexByte(value, 0) >= 0 {
		return s.errorf("the value of environment variable %q holds a NUL byte, which no process environment can carry", name)
	}
	old, defined := s.values[name]
	size := s.size + len(value)
	if defined {
		size -= len(old)
	} else {
		size += len(name) + 2
	}
	if size > s.b.maxBytes {
		return s.errorf("the environment is larger than %d bytes (at variable %q)", s.b.maxBytes, name)
	}
	if !defined {
		s.names = append(s.names, name)
	}
	s.values[name] = value
	s.size = size
	return nil
}

// readServiceEnv reads the service variables, if the builder has a source.
func (s *build) readServiceEnv() error {
	if s.b.serviceEnv == nil {
		return nil
	}
	links := s.pod.Spec.EnableServiceLinks == nil || *s.pod.Spec.EnableServiceLinks
	var env map[string]string
	if err := s.b.guard("ServiceEnv", func() (err error) {
		env, err = s.b.serviceEnv(s.ctx, s.pod.Namespace, links)
		return err
	}); err != nil {
		return &ConfigError{Container: s.c.Name, Message: "couldn't read the service variables: " + err.Error(), Err: err}
	}
	s.service = env
	for n, v := range env {
		if errs := validation.IsRelaxedEnvVarName(n); len(errs) > 0 || strings.IndexByte(v, 0) >= 0 {
			return s.errorf("the service variables hold an invalid variable %q", n)
		}
		s.serviceNames = append(s.serviceNames, n)
		s.size += len(n) + len(v) + 2
	}
	slices.Sort(s.serviceNames)
	if s.size > s.b.maxBytes {
		return s.errorf("the service variables are larger than %d bytes", s.b.maxBytes)
	}
	return nil
}

// envFrom defines the variables of one envFrom source.
func (s *build) envFrom(i int, from *v1.EnvFromSource) error {
	var (
		data           map[string]string
		kind, name     string
		optional, skip bool
		err            error
	)
	switch {
	case from.ConfigMapRef != nil:
		kind, name = "configMap", from.ConfigMapRef.Name
		optional = from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional
		var cm *v1.ConfigMap
		cm, skip, err = s.configMap(name, optional)
		if cm != nil {
			data = cm.Data
		}
	case from.SecretRef != nil:
		kind, name = "secret", from.SecretRef.Name
		optional = from.SecretRef.Optional != nil && *from.SecretRef.Optional
		var sec *v1.Secret
		sec, skip, err = s.secret(name, optional)
		if sec != nil {
			data = make(map[string]string, len(sec.Data))
			for k, v := range sec.Data {
				data[k] = string(v)
			}
		}
	default:
		return s.errorf("envFrom[%d] names neither a configMap nor a secret", i)
	}
	if err != nil || skip {
		return err
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var invalid []string
	for _, k := range keys {
		n := from.Prefix + k
		if len(validation.IsRelaxedEnvVarName(n)) > 0 {
			invalid = append(invalid, n)
			continue
		}
		if err := s.set(n, data[k]); err != nil {
			return err
		}
	}
	if len(invalid) > 0 {
		s.b.recorder.Eventf(s.pod, v1.EventTypeWarning, ReasonInvalidEnvVarNames,
			"Keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered invalid environment variable names.",
			strings.Join(invalid, ", "), kind, s.pod.Namespace, name)
	}
	return nil
}

// value returns the value of one env entry; defined is false for an
// optional reference to something missing.
func (s *build) value(e *v1.EnvVar) (value string, defined bool, err error) {
	if e.Value != "" {
		v, ok := expand(e.Value, s.lookup, s.b.maxBytes-s.size)
		if !ok {
			return "", false, s.errorf("the environment is larger than %d bytes (expanding variable %q)", s.b.maxBytes, e.Name)
		}
		return v, true, nil
	}
	from := e.ValueFrom
	switch {
	case from == nil:
		return "", true, nil
	case from.FieldRef != nil:
		v, err := s.field(from.FieldRef)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := downwardapi.ResourceValue(from.ResourceFieldRef, s.pod, s.c, s.nodeAllocatable())
		if err != nil {
			return "", false, &ConfigError{Container: s.c.Name, Message: err.Error(), Err: err}
		}
		return v, true, nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, skip, err := s.configMap(ref.Name, optional)
		if err != nil || skip {
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, s.errorf("couldn't find key %v in ConfigMap %v/%v", ref.Key, s.pod.Namespace, ref.Name)
		}
		return v, true, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		sec, skip, err := s.secret(ref.Name, optional)
		if err != nil || skip {
			return "", false, err
		}
		v, ok := sec.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, s.errorf("couldn't find key %v in Secret %v/%v", ref.Key, s.pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	case from.FileKeyRef != nil:
		return s.fileKey(from.FileKeyRef)
	}
	return "", false, s.errorf("environment variable %q: valueFrom names no source", e.Name)
}

// lookup resolves a $(NAME) reference of an env value: a variable defined
// so far, else a service variable.
func (s *build) lookup(name string) (string, bool) {
	if v, ok := s.values[name]; ok {
		return v, true
	}
	v, ok := s.service[name]
	return v, ok
}

// field resolves a fieldRef.
func (s *build) field(ref *v1.ObjectFieldSelector) (string, error) {
	path, err := downwardapi.FieldPath(ref.APIVersion, ref.FieldPath)
	if err != nil {
		return "", &ConfigError{Container: s.c.Name, Message: err.Error(), Err: err}
	}
	switch path {
	case downwardapi.SpecNodeName:
		return s.pod.Spec.NodeName, nil
	case downwardapi.SpecServiceAccount:
		return s.pod.Spec.ServiceAccountName, nil
	case downwardapi.StatusPodIP:
		if len(s.in.PodIPs) == 0 {
			return "", nil
		}
		return s.in.PodIPs[0], nil
	case downwardapi.StatusPodIPs:
		return strings.Join(s.in.PodIPs, ","), nil
	case downwardapi.StatusHostIP, downwardapi.StatusHostIPs:
		if len(s.in.HostIPs) == 0 {
			return "", s.errorf("host IP unknown")
		}
		if path == downwardapi.StatusHostIP {
			return s.in.HostIPs[0], nil
		}
		return strings.Join(s.in.HostIPs, ","), nil
	}
	v, err := downwardapi.MetadataField(s.pod, path)
	if err != nil {
		return "", &ConfigError{Container: s.c.Name, Message: err.Error(), Err: err}
	}
	return v, nil
}

// nodeAllocatable returns the node's allocatable, read once per Build.
func (s *build) nodeAllocatable() v1.ResourceList {
	if !s.readAllocatable && s.b.nodeAllocatable != nil {
		s.readAllocatable = true
		if err := s.b.guard("NodeAllocatable", func() error {
			s.allocatable = s.b.nodeAllocatable()
			return nil
		}); err != nil {
			s.allocatable = nil
		}
	}
	return s.allocatable
}

// secret returns the secret name of the pod's namespace; skip is true for
// an optional one that does not exist.
func (s *build) secret(name string, optional bool) (sec *v1.Secret, skip bool, err error) {
	if sec, seen := s.secrets[name]; seen {
		return sec, sec == nil, nil
	}
	var get apiobject.SecretFunc
	if s.b.objects != nil {
		get = s.b.objects.GetSecret
	}
	if sec, err = apiobject.Secret(s.ctx, get, s.pod.Namespace, name); err != nil {
		if err := s.readError(err, optional && get != nil, func() { s.secrets[name] = nil }); err != nil {
			return nil, false, err
		}
		return nil, true, nil // optional, and missing: it defines nothing
	}
	s.secrets[name] = sec
	return sec, false, nil
}

// configMap is secret for config maps.
func (s *build) configMap(name string, optional bool) (cm *v1.ConfigMap, skip bool, err error) {
	if cm, seen := s.configMaps[name]; seen {
		return cm, cm == nil, nil
	}
	var get apiobject.ConfigMapFunc
	if s.b.objects != nil {
		get = s.b.objects.GetConfigMap
	}
	if cm, err = apiobject.ConfigMap(s.ctx, get, s.pod.Namespace, name); err != nil {
		if err := s.readError(err, optional && get != nil, func() { s.configMaps[name] = nil }); err != nil {
			return nil, false, err
		}
		return nil, true, nil // optional, and missing: it defines nothing
	}
	s.configMaps[name] = cm
	return cm, false, nil
}

// readError turns a getter's error into the build's outcome: nil (after
// missing) for an optional object that does not exist, else a
// ConfigError. A panic is logged with its stack.
func (s *build) readError(err error, optional bool, missing func()) error {
	if apierrors.IsNotFound(err) && optional {
		missing()
		return nil
	}
	var p *apiobject.PanicError
	if errors.As(err, &p) {
		s.b.logger.Error(err, "An object getter panicked", "pod", s.pod.Namespace+"/"+s.pod.Name, "stack", string(p.Stack))
	}
	return &ConfigError{Container: s.c.Name, Message: err.Error(), Err: err}
}

// errorf makes a ConfigError for the build's container.
func (s *build) errorf(format string, args ...any) *ConfigError {
	return configErrorf(s.c.Name, format, args...)
}

// guard calls f, turning a panic into an error it logs.
func (b *Builder) guard(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", what, r)
			b.logger.Error(err, "A callback of the environment builder panicked")
		}
	}()
	return f()
}
