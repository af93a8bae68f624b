package serviceenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Source is the cluster's Services, watched, as service variables.
type Source struct {
	factory informers.SharedInformerFactory
	lister  corelisters.ServiceLister
	synced  cache.InformerSynced
	logger  logr.Logger
}

// New returns a Source over client. It starts nothing: Run watches.
// The error is for a nil client.
func New(client kubernetes.Interface, logger logr.Logger) (*Source, error) {
	if client == nil {
		return nil, errors.New("serviceenv: New needs a client, got nil")
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	services := factory.Core().V1().Services()
	informer := services.Informer() // registered before Start
	// Only what the variables need is kept: a cluster's Services can be
	// many, each with labels, annotations and managed fields.
	if err := informer.SetTransform(slimService); err != nil {
		return nil, fmt.Errorf("serviceenv: %w", err)
	}
	return &Source{factory: factory, lister: services.Lister(), synced: informer.HasSynced, logger: logger}, nil
}

// Run watches the Services until ctx ends, then stops the watch and
// returns nil. Call it once (the agent's loops do).
func (s *Source) Run(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.synced) && ctx.Err() == nil {
		s.logger.Info("The services were not read before the watch stopped")
	}
	<-ctx.Done()
	s.factory.Shutdown()
	return nil
}

// Env returns the service variables of a pod in namespace with
// enableServiceLinks (podenv.Options.ServiceEnv). The error says the
// Services were not read yet.
func (s *Source) Env(_ context.Context, namespace string, enableServiceLinks bool) (map[string]string, error) {
	if !s.synced() {
		return nil, errors.New("serviceenv: the cluster's services have not been read yet")
	}
	services, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("serviceenv: listing the services: %w", err)
	}
	return Variables(services, namespace, enableServiceLinks), nil
}

// slimService is the informer's transform: a Service reduced to what
// Variables reads (its name, namespace, cluster IP and ports; the
// resourceVersion the informer needs), anything else as it came.
func slimService(obj any) (any, error) {
	svc, ok := obj.(*v1.Service)
	if !ok {
		return obj, nil // a deletion marker
	}
	slim := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, UID: svc.UID, ResourceVersion: svc.ResourceVersion},
		Spec:       v1.ServiceSpec{ClusterIP: svc.Spec.ClusterIP, Ports: make([]v1.ServicePort, len(svc.Spec.Ports))},
	}
	for i, p := range svc.Spec.Ports {
		slim.Spec.Ports[i] = v1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port}
	}
	return slim, nil
}

// The Service whose variables every pod gets, enableServiceLinks or not.
const (
	masterNamespace = v1.NamespaceDefault
	masterName      = "kubernetes"
)

// Variables returns the service variables a pod in namespace gets from
// services (see the package doc). It does not keep services.
func Variables(services []*v1.Service, namespace string, enableServiceLinks bool) map[string]string {
	chosen := map[string]*v1.Service{}
	for _, svc := range services {
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone {
			continue
		}
		switch {
		case svc.Namespace == masterNamespace && svc.Name == masterName:
			if _, ok := chosen[svc.Name]; !ok {
				chosen[svc.Name] = svc
			}
		case svc.Namespace == namespace && enableServiceLinks:
			chosen[svc.Name] = svc
		}
	}
	names := make([]string, 0, len(chosen))
	for name := range chosen {
		names = append(names, name)
	}
	sort.Strings(names)
	env := map[string]string{}
	for _, name := range names {
		addService(env, chosen[name])
	}
	return env
}

// addService adds the variables of svc, which has a cluster IP.
func addService(env map[string]string, svc *v1.Service) {
	prefix := variableName(svc.Name)
	ip := svc.Spec.ClusterIP
	env[prefix+"_SERVICE_HOST"] = ip
	if len(svc.Spec.Ports) == 0 {
		return
	}
	env[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(svc.Spec.Ports[0].Port))
	for i, p := range svc.Spec.Ports {
		port := strconv.Itoa(int(p.Port))
		if p.Name != "" {
			env[prefix+"_SERVICE_PORT_"+variableName(p.Name)] = port
		}
		protocol := string(p.Protocol)
		if protocol == "" {
			protocol = string(v1.ProtocolTCP)
		}
		lower := strings.ToLower(protocol)
		url := lower + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			env[prefix+"_PORT"] = url
		}
		link := prefix + "_PORT_" + port + "_" + strings.ToUpper(protocol)
		env[link] = url
		env[link+"_PROTO"] = lower
		env[link+"_PORT"] = port
		env[link+"_ADDR"] = ip
	}
}

// variableName is a Service's or port's name as the variables spell it.
func variableName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}
