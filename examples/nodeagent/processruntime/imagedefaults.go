package processruntime

// defaultImageEntries are the configurations of common images whose
// programs a machine usually has, as their official images give them
// (Docker Hub's "library" images), so that the pods of the Kubernetes
// documentation, which give these images args and no command (or
// neither), run as on a kubelet: busybox's `args: [sh, -c, ...]` runs sh.
//
// Where an image's ENTRYPOINT is a shell script that only sets the image
// up and then runs its arguments (nginx, node, redis, bash:
// docker-entrypoint.sh), the entry has no entrypoint: the host has no such
// script, and the arguments run as the script would run them. perl's CMD
// names its versioned program (perl5.x.y); the entry names perl. No entry
// has env, workingDir or user: the program run is the host's, so the
// image's PYTHON_VERSION or GOPATH would not describe it. busybox's
// commands are applets of the node's busybox where it has one (Multicall),
// so its sh is ash, as in the image, not the node's dash.
var defaultImageEntries = map[string]ImageConfig{
	"busybox":             {Cmd: []string{"sh"}, Multicall: "busybox"},
	"alpine":              {Cmd: []string{"/bin/sh"}},
	"debian":              {Cmd: []string{"bash"}},
	"ubuntu":              {Cmd: []string{"/bin/bash"}},
	"centos":              {Cmd: []string{"/bin/bash"}},
	"fedora":              {Cmd: []string{"/bin/bash"}},
	"rockylinux":          {Cmd: []string{"/bin/bash"}},
	"almalinux":           {Cmd: []string{"/bin/bash"}},
	"amazonlinux":         {Cmd: []string{"/bin/bash"}},
	"oraclelinux":         {Cmd: []string{"/bin/bash"}},
	"archlinux":           {Cmd: []string{"/usr/bin/bash"}},
	"opensuse/leap":       {Cmd: []string{"/bin/bash"}},
	"opensuse/tumbleweed": {Cmd: []string{"/bin/bash"}},
	"bash":                {Cmd: []string{"bash"}},
	"python":              {Cmd: []string{"python3"}},
	"perl":                {Cmd: []string{"perl"}},
	"ruby":                {Cmd: []string{"irb"}},
	"php":                 {Cmd: []string{"php", "-a"}},
	"node":                {Cmd: []string{"node"}},
	"golang":              {Cmd: []string{"bash"}},
	"nginx":               {Cmd: []string{"nginx", "-g", "daemon off;"}},
	"httpd":               {Cmd: []string{"httpd-foreground"}},
	"redis":               {Cmd: []string{"redis-server"}},
}

// defaultImages is the table of defaultImageEntries.
var defaultImages = mustImageTable(defaultImageEntries)

func mustImageTable(entries map[string]ImageConfig) *ImageTable {
	t, err := NewImageTable(entries)
	if err != nil {
		panic(err)
	}
	return t
}

// DefaultImageConfigs returns the runtime's default image configurations
// (consulted after Options.ImageConfigs), keyed as ImageTable keys them:
// common base images without an ENTRYPOINT, whose CMD names a program a
// machine usually has (busybox, alpine, debian, ubuntu, python, perl,
// nginx, ...). The map is the caller's.
func DefaultImageConfigs() map[string]ImageConfig {
	out := make(map[string]ImageConfig, len(defaultImageEntries))
	for k, v := range defaultImageEntries {
		out[k] = v.clone()
	}
	return out
}
