package processruntime

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// This file holds what the runtime knows of images' configurations: it
// pulls no image, so a container without a command of its own runs what
// its image's entrypoint and cmd name, found in a table (the defaults
// below, and what the agent adds), as the host's program of that name.

// ImageConfig is the part of an image's configuration (its OCI config)
// that says how a container of it runs when the pod spec does not: as a
// container runtime reads it from the image.
type ImageConfig struct {
	// Entrypoint is the image's ENTRYPOINT; empty when it has none. [""]
	// is an entrypoint reset to none, as an image config can say.
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Cmd is the image's CMD: the arguments when the container gives
	// neither command nor args.
	Cmd []string `json:"cmd,omitempty"`
	// WorkingDir is the image's WORKDIR, for containers without one.
	WorkingDir string `json:"workingDir,omitempty"`
	// Env is the image's ENV, "KEY=value" each; the container's env wins
	// over it.
	Env []string `json:"env,omitempty"`
	// User is the image's USER as a numeric "uid" or "uid:gid" (inside
	// the pod), for containers without runAsUser; empty is root. A user
	// name is refused: the runtime reads no image's /etc/passwd.
	User string `json:"user,omitempty"`
	// Multicall names the multi-call program whose applets the image's
	// commands are (busybox): where the node has that program (in the
	// agent's PATH), a container command that names one of its applets
	// ("sh", "/bin/sh", "wget") runs as that applet of the node's
	// program, as in the image, rather than as the node's program of the
	// same name (dash for sh, say). Elsewhere, or for a command that is no
	// applet of it, the command runs as without Multicall.
	Multicall string `json:"multicall,omitempty"`
}

// ImageConfigs tells the runtime the configuration of an image, by its
// reference as a pod spec gives it. The runtime asks it first, then its
// defaults (DefaultImageConfigs); an image neither knows is an unknown
// image: a container of it needs a command of its own.
//
// ImageConfig is called from SyncPod and from the runtime's start of a
// container; it must not block, and it may be called concurrently.
type ImageConfigs interface {
	ImageConfig(image string) (cfg ImageConfig, ok bool)
}

// ImageTable is an ImageConfigs over a table of image references. A key
// is an image reference with or without its tag ("busybox",
// "example.com/team/app:1.2"); it matches an image by repository name,
// whatever the registry (docker.io, registry.k8s.io, localhost:5000, ...,
// or none) and the digest:
//
//   - "team/app" matches the images whose repository path, without its
//     registry and Docker Hub's "library/", is team/app;
//   - a key without a slash ("busybox") also matches any repository whose
//     last path element it is (registry.k8s.io/e2e-test-images/busybox);
//   - a key with a tag matches that tag only.
//
// Of the keys that match, the most specific wins: the whole path before
// the last element, and a tag before none. The zero value is an empty
// table. A table is not changed after it is built and is safe for
// concurrent use.
type ImageTable struct {
	entries map[imageKey]ImageConfig
}

var _ ImageConfigs = (*ImageTable)(nil)

// imageKey is a table key: a repository path without registry, and a
// tag ("" for any).
type imageKey struct {
	repo, tag string
}

// Bounds of an image table: what LoadImageTable reads and NewImageTable
// accepts, so that a mistaken file cannot take the agent's memory.
const (
	// MaxImageTableBytes is the largest image table file LoadImageTable
	// reads: 1 MiB.
	MaxImageTableBytes = 1 << 20
	// MaxImageTableEntries is the most entries a table holds.
	MaxImageTableEntries = 10000
)

// NewImageTable builds a table from entries keyed by image reference (see
// ImageTable). The error, prefixed "processruntime:", names the first
// entry that is wrong: an empty or malformed reference, two keys naming
// the same repository and tag, an env entry without a name, a user that is
// not numeric, or more than MaxImageTableEntries entries.
func NewImageTable(entries map[string]ImageConfig) (*ImageTable, error) {
	if len(entries) > MaxImageTableEntries {
		return nil, fmt.Errorf("processruntime: image table: %d entries, at most %d", len(entries), MaxImageTableEntries)
	}
	t := &ImageTable{entries: make(map[imageKey]ImageConfig, len(entries))}
	refs := make([]string, 0, len(entries))
	for ref := range entries {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		k, err := parseImageRef(ref)
		if err != nil {
			return nil, fmt.Errorf("processruntime: image table: %w", err)
		}
		if _, dup := t.entries[k]; dup {
			return nil, fmt.Errorf("processruntime: image table: %q names the same image as another entry", ref)
		}
		cfg := entries[ref]
		if err := cfg.validate(); err != nil {
			return nil, fmt.Errorf("processruntime: image table: %q: %w", ref, err)
		}
		t.entries[k] = cfg.clone()
	}
	return t, nil
}

// imageTableFile is the file format of LoadImageTable.
type imageTableFile struct {
	Images map[string]ImageConfig `json:"images"`
}

// LoadImageTable reads an image table from a YAML or JSON file of the form
//
//	images:
//	  busybox:
//	    cmd: [sh]
//	  example.com/team/app:1.2:
//	    entrypoint: [/usr/local/bin/app]
//	    cmd: [--port=8080]
//	    workingDir: /srv/app
//	    env: [MODE=production]
//	    user: "1000:1000"
//
// (keys as ImageTable matches them; fields as ImageConfig's). Unknown
// fields are errors, so a misspelt one is not silently ignored; so is a
// file larger than MaxImageTableBytes. Errors are prefixed
// "processruntime:" and name the file.
func LoadImageTable(path string) (*ImageTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("processruntime: image table: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxImageTableBytes+1))
	if err != nil {
		return nil, fmt.Errorf("processruntime: image table %s: %w", path, err)
	}
	if len(data) > MaxImageTableBytes {
		return nil, fmt.Errorf("processruntime: image table %s: larger than %d bytes", path, MaxImageTableBytes)
	}
	var file imageTableFile
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return nil, fmt.Errorf("processruntime: image table %s: %w", path, err)
	}
	t, err := NewImageTable(file.Images)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// ImageConfig returns the configuration of the most specific entry that
// matches image (see ImageTable), and whether one does. The result is the
// caller's.
func (t *ImageTable) ImageConfig(image string) (ImageConfig, bool) {
	if t == nil || len(t.entries) == 0 {
		return ImageConfig{}, false
	}
	k, err := parseImageRef(image)
	if err != nil {
		return ImageConfig{}, false
	}
	last := k.repo[strings.LastIndex(k.repo, "/")+1:]
	for _, try := range []imageKey{{k.repo, k.tag}, {k.repo, ""}, {last, k.tag}, {last, ""}} {
		if cfg, ok := t.entries[try]; ok {
			return cfg.clone(), true
		}
	}
	return ImageConfig{}, false
}

// Len returns how many entries the table holds.
func (t *ImageTable) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// parseImageRef splits an image reference into its repository path
// (without registry, without Docker Hub's "library/") and its tag,
// dropping the digest.
func parseImageRef(ref string) (imageKey, error) {
	name := ref
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	tag := ""
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, tag = name[:i], name[i+1:]
		if tag == "" {
			return imageKey{}, fmt.Errorf("image reference %q has an empty tag", ref)
		}
	}
	if i := strings.IndexByte(name, '/'); i >= 0 {
		if first := name[:i]; strings.ContainsAny(first, ".:") || first == "localhost" {
			name = name[i+1:]
		}
	}
	name = strings.TrimPrefix(name, "library/")
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//") || strings.ContainsAny(name, " \t\n") {
		return imageKey{}, fmt.Errorf("image reference %q has no repository name", ref)
	}
	return imageKey{repo: name, tag: tag}, nil
}

// validate checks what a runtime cannot use.
func (c ImageConfig) validate() error {
	for _, e := range c.Env {
		if i := strings.IndexByte(e, '='); i <= 0 {
			return fmt.Errorf("env entry %q is not KEY=value", e)
		}
	}
	if _, err := parseImageUser(c.User); err != nil {
		return err
	}
	if strings.ContainsAny(c.Multicall, "/ \t\n") {
		return fmt.Errorf("multicall %q must be a program's name, without a path", c.Multicall)
	}
	return nil
}

func (c ImageConfig) clone() ImageConfig {
	c.Entrypoint = append([]string(nil), c.Entrypoint...)
	c.Cmd = append([]string(nil), c.Cmd...)
	c.Env = append([]string(nil), c.Env...)
	return c
}

// parseImageUser reads a numeric USER: "uid" (group 0, as a runtime
// gives a user the image's /etc/passwd does not list) or "uid:gid". Empty
// is root.
func parseImageUser(s string) (ImageUser, error) {
	if s == "" {
		return ImageUser{}, nil
	}
	u, g, hasGroup := strings.Cut(s, ":")
	uid, err := strconv.ParseInt(u, 10, 64)
	if err != nil || uid < 0 {
		return ImageUser{}, fmt.Errorf("user %q is not numeric (uid or uid:gid): the process runtime reads no image's /etc/passwd to resolve a name", s)
	}
	var gid int64
	if hasGroup {
		if gid, err = strconv.ParseInt(g, 10, 64); err != nil || gid < 0 {
			return ImageUser{}, fmt.Errorf("user %q: group %q is not numeric", s, g)
		}
	}
	return ImageUser{UID: uid, GID: gid}, nil
}

// imageConfig looks image up: Options.ImageConfigs, then the defaults.
func (r *Runtime) imageConfig(image string) (ImageConfig, bool) {
	if r.imageConfigs != nil {
		if cfg, ok := r.imageConfigs.ImageConfig(image); ok {
			return cfg, true
		}
	}
	return defaultImages.ImageConfig(image)
}

// imageUser is the user image runs as: Options.ImageUsers's, else its
// configuration's (a known image without USER runs as root).
func (r *Runtime) imageUser(image string) (ImageUser, bool) {
	if r.imageUsers != nil {
		if u, ok := r.imageUsers.ImageUser(image); ok {
			return u, true
		}
	}
	cfg, ok := r.imageConfig(image)
	if !ok {
		return ImageUser{}, false
	}
	u, err := parseImageUser(cfg.User)
	if err != nil {
		// Only from an ImageConfigs of the agent's own that is not an
		// ImageTable: not known, so runAsNonRoot is not taken as met.
		return ImageUser{}, false
	}
	return u, true
}
