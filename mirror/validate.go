package mirror

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidatePodObject checks a static pod the way the kubelet does before it
// admits one (no API server has validated it), for the fields an agent
// relies on: the metadata as the API server checks it on create (the name
// a DNS subdomain, the namespace a DNS label, labels, annotations and
// their total size of 256 KiB, owner references, finalizers), and in the
// spec: at least one container; container names DNS labels, unique across
// init, regular and ephemeral containers; an image for each; env var
// names; ports; volume names (unique DNS labels) and the volume mounts that
// refer to them; the restart and DNS policies; non-negative
// terminationGracePeriodSeconds and positive activeDeadlineSeconds;
// hostname and subdomain DNS labels; and non-negative resource quantities,
// requests not above limits. It is not the API server's full validation
// (k8s.io/kubernetes cannot be imported): a pod it accepts can still be one
// the API server would refuse as a mirror pod.
//
// PrepareStaticPod calls it on the prepared pod (its final name and
// namespace), so sources that use PrepareStaticPod need not. The error,
// prefixed "mirror: ", lists every problem with its field path; nil means
// valid. Safe for concurrent use; pod is not modified.
func ValidatePodObject(pod *v1.Pod) error {
	if pod == nil {
		return errors.New("mirror: ValidatePodObject: nil pod")
	}
	errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
	if len(errs) > 0 {
		return fmt.Errorf("mirror: static pod %s/%s is invalid: %w", pod.Namespace, pod.Name, errs.ToAggregate())
	}
	return nil
}

func validatePodSpec(spec *v1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := sets.New[string]()
	for i, vol := range spec.Volumes {
		p := path.Child("volumes").Index(i).Child("name")
		errs = append(errs, dnsLabel(vol.Name, p)...)
		if volumes.Has(vol.Name) {
			errs = append(errs, field.Duplicate(p, vol.Name))
		}
		volumes.Insert(vol.Name)
	}
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "a pod needs at least one container"))
	}
	names := sets.New[string]()
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := path.Child("initContainers").Index(i)
		errs = append(errs, validateContainer(c, p, names, volumes)...)
		if c.RestartPolicy != nil && *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []string{string(v1.ContainerRestartPolicyAlways)}))
		}
	}
	for i := range spec.Containers {
		errs = append(errs, validateContainer(&spec.Containers[i], path.Child("containers").Index(i), names, volumes)...)
	}
	for i := range spec.EphemeralContainers {
		c := v1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		errs = append(errs, validateContainer(&c, path.Child("ephemeralContainers").Index(i), names, volumes)...)
	}
	switch spec.RestartPolicy {
	case "", v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, []string{string(v1.RestartPolicyAlways), string(v1.RestartPolicyOnFailure), string(v1.RestartPolicyNever)}))
	}
	switch spec.DNSPolicy {
	case "", v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone:
	default:
		errs = append(errs, field.NotSupported(path.Child("dnsPolicy"), spec.DNSPolicy, []string{string(v1.DNSClusterFirst), string(v1.DNSClusterFirstWithHostNet), string(v1.DNSDefault), string(v1.DNSNone)}))
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *d, "must be greater than 0"))
	}
	if spec.Hostname != "" {
		errs = append(errs, dnsLabel(spec.Hostname, path.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, dnsLabel(spec.Subdomain, path.Child("subdomain"))...)
	}
	return errs
}

// validateContainer checks one container; names holds the container names
// seen so far, volumes the pod's volume names.
func validateContainer(c *v1.Container, path *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	p := path.Child("name")
	if c.Name == "" {
		errs = append(errs, field.Required(p, ""))
	} else {
		errs = append(errs, dnsLabel(c.Name, p)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p, c.Name))
		}
		names.Insert(c.Name)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	}
	for i, e := range c.Env {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(path.Child("env").Index(i).Child("name"), e.Name, msg))
		}
	}
	ports := sets.New[string]()
	for i, port := range c.Ports {
		pp := path.Child("ports").Index(i)
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if ports.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			ports.Insert(port.Name)
		}
		switch port.Protocol {
		case "", v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{string(v1.ProtocolTCP), string(v1.ProtocolUDP), string(v1.ProtocolSCTP)}))
		}
	}
	for i, m := range c.VolumeMounts {
		mp := path.Child("volumeMounts").Index(i)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		}
	}
	rp := path.Child("resources")
	for name, q := range c.Resources.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
		if limit, ok := c.Resources.Limits[name]; ok && q.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), q.String(), "must be less than or equal to the "+string(name)+" limit of "+limit.String()))
		}
	}
	for name, q := range c.Resources.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("limits").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

func dnsLabel(s string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(s) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}
