// Package releaseversion makes a Kubernetes program built from module
// source (go build, go run, go tool) report the Kubernetes release it is
// built from, as a release build does. Release builds set the version
// variables of k8s.io/component-base/version with the linker (-ldflags -X
// ...gitVersion=v1.37.2); a plain go build leaves v0.0.0-master, which
// kubectl version refuses ("could not parse pre-release/metadata") and
// which the API server reports. podkit-controlplane and this module's
// kubectl call Set first thing in main.
package releaseversion

import (
	"fmt"
	"runtime/debug"
	"strings"
	_ "unsafe" // for go:linkname

	"k8s.io/component-base/version"
)

// The version variables of k8s.io/component-base/version that its Get
// reports, which the linker sets in release builds.
var (
	//go:linkname gitVersion k8s.io/component-base/version.gitVersion
	gitVersion string
	//go:linkname gitMajor k8s.io/component-base/version.gitMajor
	gitMajor string
	//go:linkname gitMinor k8s.io/component-base/version.gitMinor
	gitMinor string
	//go:linkname gitTreeState k8s.io/component-base/version.gitTreeState
	gitTreeState string
)

// Set sets the version the program reports to the release in its build
// information, and returns it: k8s.io/kubernetes's version when the
// program is built with it, else the release of its
// k8s.io/component-base (a staging module's v0.N.M is release v1.N.M).
// A version the linker set is kept. It must be called before anything
// reads the version, from main's goroutine. The error says why no release
// was found; the version is then left as it is.
func Set() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("releaseversion: no build information")
	}
	return set(info.Deps)
}

// set is Set for the modules deps.
func set(deps []*debug.Module) (string, error) {
	if !strings.HasPrefix(gitVersion, "v0.0.0-") {
		return gitVersion, nil // set by the linker, or before
	}
	release, err := fromDeps(deps)
	if err != nil {
		return "", err
	}
	parts := strings.SplitN(strings.TrimPrefix(release, "v"), ".", 3)
	gitVersion, gitMajor, gitMinor, gitTreeState = release, parts[0], parts[1], "clean"
	// Get reports the dynamic version, which the package's init took from
	// gitVersion; setting it to gitVersion is always allowed.
	if err := version.SetDynamicVersion(release); err != nil {
		return "", fmt.Errorf("releaseversion: %w", err)
	}
	return release, nil
}

// fromDeps returns the Kubernetes release of deps.
func fromDeps(deps []*debug.Module) (string, error) {
	var staging string
	for _, dep := range deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		switch dep.Path {
		case "k8s.io/kubernetes":
			if strings.Count(dep.Version, ".") == 2 && strings.HasPrefix(dep.Version, "v1.") {
				return dep.Version, nil
			}
		case "k8s.io/component-base":
			if parts := strings.SplitN(dep.Version, ".", 3); len(parts) == 3 && parts[0] == "v0" && parts[1] != "0" {
				staging = "v1." + parts[1] + "." + parts[2]
			}
		}
	}
	if staging == "" {
		return "", fmt.Errorf("releaseversion: neither k8s.io/kubernetes nor k8s.io/component-base at a release in the build information")
	}
	return staging, nil
}
