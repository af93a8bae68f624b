package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// netConfig is what the flags say of the pods' sandbox and network.
type netConfig struct {
	sandbox    processruntime.SandboxMode
	podCIDR    netip.Prefix
	fromNode   bool
	clusterDNS []netip.Addr
}

// networkConfig reads --sandbox, --pod-cidr and --cluster-dns.
func networkConfig(sandbox, podCIDR, bridge, clusterDNS string) (netConfig, error) {
	var c netConfig
	switch sandbox {
	case "auto":
		c.sandbox = processruntime.SandboxAuto
	case "on":
		c.sandbox = processruntime.SandboxRequired
	case "off":
		c.sandbox = processruntime.SandboxOff
	default:
		return c, fmt.Errorf("--sandbox %q: want auto, on or off", sandbox)
	}
	switch podCIDR {
	case "":
		c.fromNode = true
	case "none":
		if bridge != "" {
			return c, fmt.Errorf("--bridge-name needs a pod network (--pod-cidr is none)")
		}
	default:
		p, err := netip.ParsePrefix(podCIDR)
		if err != nil {
			return c, fmt.Errorf("--pod-cidr: %w", err)
		}
		c.podCIDR = p
	}
	for _, s := range strings.Split(clusterDNS, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return c, fmt.Errorf("--cluster-dns: %w", err)
		}
		c.clusterDNS = append(c.clusterDNS, ip)
	}
	return c, nil
}

// systemdResolvConf is systemd-resolved's file naming the upstream
// servers.
const systemdResolvConf = "/run/systemd/resolve/resolv.conf"

// defaultResolvConf is /etc/resolv.conf, unless it names only loopback
// servers (systemd-resolved's stub, 127.0.0.53) and systemd-resolved's
// upstream file exists: pods in a network namespace of their own cannot
// reach the host's loopback. (kubeadm chooses the same way.)
func defaultResolvConf() string {
	b, err := os.ReadFile(processruntime.DefaultResolvConf)
	if err != nil {
		return processruntime.DefaultResolvConf
	}
	loopbackOnly := false
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		ip, err := netip.ParseAddr(f[1])
		if err != nil || !ip.IsLoopback() {
			return processruntime.DefaultResolvConf
		}
		loopbackOnly = true
	}
	if _, err := os.Stat(systemdResolvConf); loopbackOnly && err == nil {
		return systemdResolvConf
	}
	return processruntime.DefaultResolvConf
}
