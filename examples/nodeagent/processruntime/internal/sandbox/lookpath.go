package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LookPath finds the executable a command runs, as a runtime does: name
// itself when it holds a slash (relative to dir), else the first match in
// the directories of path (a PATH value; relative entries are skipped).
// The error names the command and the PATH searched, so a typo in a
// manifest is plain to see. The container stage runs it in the pod's
// view; the runtime runs it on the host for pods outside a sandbox.
func LookPath(name, path, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("command %q: %w", name, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in PATH %q", name, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return errors.New("no such file")
	case fi.IsDir():
		return errors.New("is a directory")
	case fi.Mode()&0o111 == 0:
		return errors.New("is not executable")
	}
	return nil
}

// DefaultPath is the PATH a command is looked up in when its environment
// sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// envPath returns the PATH of env (the last one), or DefaultPath.
func envPath(env []string) string {
	path := DefaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return path
}
