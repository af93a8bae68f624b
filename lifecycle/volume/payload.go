package volume

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/internal/downwardapi"
)

// defaultMode is the mode of a projected file whose volume sets none: the
// API server's default for configMap, secret, downwardAPI and projected
// volumes (a static pod's manifest may leave it unset).
const defaultMode int32 = 0o644

// Bounds of a path inside a volume, as the kubelet's atomic writer has
// them: a path name's component, and the whole path.
const (
	maxFileNameLength = 255
	maxPathLength     = 4096
)

// projection is one file of a volume the manager writes (configMap,
// secret, downwardAPI, projected): its content, mode, and owner in the
// pod's id space (nil: the pod's root).
type projection struct {
	data []byte
	mode int32
	user *int64
}

// payload is a volume's files by their paths, relative to the volume and
// clean.
type payload map[string]projection

// keyPayload returns the files of a config map's or secret's data: every
// key as a file named by it when items is empty, else the items' keys at
// their paths. A key items names and data lacks is an error unless
// optional (the file is then left out). kind is "configmap" or "secret",
// for the kubelet's messages.
func keyPayload(kind string, items []v1.KeyToPath, data map[string][]byte, mode *int32, defaultUser *int64, optional bool) (payload, error) {
	dm := modeOr(mode, defaultMode)
	p := make(payload, len(data))
	if len(items) == 0 {
		for k, v := range data {
			p[k] = projection{data: v, mode: dm, user: defaultUser}
		}
		return p, nil
	}
	for _, item := range items {
		v, ok := data[item.Key]
		if !ok {
			if optional {
				continue
			}
			if kind == "secret" {
				return nil, fmt.Errorf("references non-existent secret key: %s", item.Key)
			}
			return nil, fmt.Errorf("configmap references non-existent config key: %s", item.Key)
		}
		p[item.Path] = projection{data: v, mode: modeOr(item.Mode, dm), user: userOr(item.User, defaultUser)}
	}
	return p, nil
}

// configMapData returns a config map's data and binaryData as one map.
func configMapData(cm *v1.ConfigMap) map[string][]byte {
	out := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	return out
}

// downwardPayload returns the files of a downwardAPI volume or projection:
// each item's field of the pod's metadata, or resource of one of its
// containers (unset limits read as allocatable). Every item's error is
// reported, joined.
func downwardPayload(items []v1.DownwardAPIVolumeFile, pod *v1.Pod, allocatable v1.ResourceList, mode *int32, defaultUser *int64) (payload, error) {
	dm := modeOr(mode, defaultMode)
	p := make(payload, len(items))
	var errs []error
	for _, item := range items {
		var (
			value string
			err   error
		)
		switch {
		case item.FieldRef != nil:
			var fp string
			if fp, err = downwardapi.FieldPath(item.FieldRef.APIVersion, item.FieldRef.FieldPath); err == nil {
				value, err = downwardapi.MetadataField(pod, fp)
			}
		case item.ResourceFieldRef != nil:
			value, err = downwardapi.ResourceValue(item.ResourceFieldRef, pod, nil, allocatable)
		default:
			err = fmt.Errorf("item %q selects neither a field nor a resource", item.Path)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p[item.Path] = projection{data: []byte(value), mode: modeOr(item.Mode, dm), user: userOr(item.User, defaultUser)}
	}
	return p, errors.Join(errs...)
}

// modeOr returns *m, or def when m is nil.
func modeOr(m *int32, def int32) int32 {
	if m == nil {
		return def
	}
	return *m
}

// userOr returns u, or def when u is nil.
func userOr(u, def *int64) *int64 {
	if u == nil {
		return def
	}
	return u
}

// merge adds q's files to p; a path of both takes q's (a later source of a
// projected volume wins, as on the kubelet).
func (p payload) merge(q payload) {
	for k, v := range q {
		p[k] = v
	}
}

// clean validates every path of p and returns p with its paths cleaned, or
// an error naming the first bad path (in sorted order). A path may not be
// empty or absolute, hold a ".." component or a NUL byte, start with ".."
// (the writer's own names), exceed maxPathLength or a component
// maxFileNameLength; no path may be another's directory (a file "a" and a
// file "a/b"). Modes must be within 0777, owners not negative.
func (p payload) clean() (payload, error) {
	out := make(payload, len(p))
	paths := make([]string, 0, len(p))
	for k := range p {
		paths = append(paths, k)
	}
	sort.Strings(paths)
	for _, k := range paths {
		c, err := cleanPath(k)
		if err != nil {
			return nil, err
		}
		f := p[k]
		if f.mode < 0 || f.mode > 0o777 {
			return nil, fmt.Errorf("invalid mode %#o for path %q: must be within 0000 and 0777", f.mode, k)
		}
		if f.user != nil && *f.user < 0 {
			return nil, fmt.Errorf("invalid user %d for path %q", *f.user, k)
		}
		if _, dup := out[c]; dup {
			return nil, fmt.Errorf("invalid path: %q and another path are the same file", k)
		}
		out[c] = f
	}
	for c := range out {
		for dir := path.Dir(c); dir != "."; dir = path.Dir(dir) {
			if _, isFile := out[dir]; isFile {
				return nil, fmt.Errorf("invalid path: %q is a file and the directory of %q", dir, c)
			}
		}
	}
	return out, nil
}

// cleanPath validates one path of a volume's files and returns it clean.
func cleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("invalid path: must not be empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("invalid path %q: must not hold a NUL byte", p)
	case path.IsAbs(p):
		return "", fmt.Errorf("invalid path: must be relative path: %s", p)
	case len(p) > maxPathLength:
		return "", fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLength)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("invalid path: must not contain '..': %s", p)
		}
		if len(part) > maxFileNameLength {
			return "", fmt.Errorf("invalid path: filenames must be less than or equal to %d characters", maxFileNameLength)
		}
	}
	c := path.Clean(p)
	if c == "." {
		return "", fmt.Errorf("invalid path %q: names the volume itself", p)
	}
	if strings.HasPrefix(c, "..") {
		return "", fmt.Errorf("invalid path: must not start with '..': %s", p)
	}
	return c, nil
}
