package podenv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// fileKey resolves a fileKeyRef: the value of a key of an env file in one
// of the pod's volumes.
func (s *build) fileKey(ref *v1.FileKeySelector) (string, bool, error) {
	optional := ref.Optional != nil && *ref.Optional
	if s.b.volumeFiles == nil {
		return "", false, s.errorf("fileKeyRef to volume %q: this node cannot read volume files for the environment", ref.VolumeName)
	}
	if !podHasVolume(s.pod, ref.VolumeName) {
		return "", false, s.errorf("cannot find the volume %q referenced by FileKeyRef", ref.VolumeName)
	}
	var data []byte
	err := s.b.guard("OpenVolumeFile", func() error {
		r, err := s.b.volumeFiles.OpenVolumeFile(s.pod.UID, ref.VolumeName, ref.Path)
		if err != nil {
			return err
		}
		defer r.Close()
		data, err = io.ReadAll(io.LimitReader(r, int64(s.b.maxBytes)+1))
		return err
	})
	switch {
	case errors.Is(err, fs.ErrNotExist) && optional:
		return "", false, nil
	case err != nil:
		return "", false, &ConfigError{Container: s.c.Name, Message: fmt.Sprintf("couldn't read env file %q of volume %q: %v", ref.Path, ref.VolumeName, err), Err: err}
	case len(data) > s.b.maxBytes:
		return "", false, s.errorf("env file %q of volume %q is larger than %d bytes", ref.Path, ref.VolumeName, s.b.maxBytes)
	}
	value, found, err := envFileValue(string(data), ref.Key)
	switch {
	case err != nil:
		return "", false, s.errorf("couldn't parse env file %q of volume %q: %v", ref.Path, ref.VolumeName, err)
	case !found && optional:
		return "", false, nil
	case !found:
		return "", false, s.errorf("environment variable key %q not found in file %q of volume %q", ref.Key, ref.Path, ref.VolumeName)
	}
	return value, true, nil
}

// podHasVolume reports whether pod declares a volume named name.
func podHasVolume(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return true
		}
	}
	return false
}

// envFileValue returns the value of key in an env file, in the format the
// kubelet reads for fileKeyRef:
//
//   - blank lines and lines starting with # (after leading blanks) are
//     skipped;
//   - every other line is NAME='value', with no blank before the =; the
//     value is single-quoted, may span lines, holds no single quote, and
//     only blanks or a # comment may follow the closing quote;
//   - NAME= followed by a blank defines NAME as empty (as a shell reads
//     NAME= 'x').
//
// The first definition of key wins. A malformed line is an error, wherever
// it is, up to the definition of key.
func envFileValue(data, key string) (value string, found bool, err error) {
	lines := strings.Split(data, "\n")
	for n := 0; n < len(lines); n++ {
		line := strings.TrimLeft(strings.TrimSuffix(lines[n], "\r"), " \t")
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, "=")
		switch {
		case !ok:
			return "", false, fmt.Errorf("line %d: missing '='", n+1)
		case name == "":
			return "", false, fmt.Errorf("line %d: empty variable name", n+1)
		case strings.TrimRight(name, " \t") != name:
			return "", false, fmt.Errorf("line %d: whitespace before '=' is not allowed", n+1)
		}
		if trimmed := strings.TrimLeft(rest, " \t"); trimmed != rest {
			if name == key {
				return "", true, nil
			}
			continue
		}
		if !strings.HasPrefix(rest, "'") {
			return "", false, fmt.Errorf("line %d: value must be enclosed in single quotes", n+1)
		}
		first := n
		var b strings.Builder
		rest = rest[1:]
		for {
			if end := strings.IndexByte(rest, '\''); end >= 0 {
				b.WriteString(rest[:end])
				after := strings.TrimLeft(rest[end+1:], " \t\r")
				if after != "" && after[0] != '#' {
					return "", false, fmt.Errorf("line %d: unexpected content after closing quote", n+1)
				}
				break
			}
			b.WriteString(rest)
			n++
			if n >= len(lines) {
				return "", false, fmt.Errorf("line %d: unclosed single quote", first+1)
			}
			b.WriteByte('\n')
			rest = strings.TrimSuffix(lines[n], "\r")
		}
		if name == key {
			return b.String(), true, nil
		}
	}
	return "", false, nil
}
