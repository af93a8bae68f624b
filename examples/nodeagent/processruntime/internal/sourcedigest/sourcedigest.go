// Package sourcedigest names a package's Go source by a digest of it, so
// that two programs can tell whether they were built from the same source
// of a package they both link: the process runtime and the stage program
// it runs (cmd/podkit-stages), which must agree on everything the sandbox
// and the log shim exchange with it.
package sourcedigest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io/fs"
	"slices"
	"strings"
)

// Of returns the hex SHA-256 digest of the Go files at the root of fsys
// (a package's directory, embedded with //go:embed *.go), tests left out:
// each file's name and contents, in name order. A file that cannot be
// read (never, in an embedded file system) makes it "unreadable: " and
// the error.
func Of(fsys fs.FS) string {
	names, err := fs.Glob(fsys, "*.go")
	if err != nil {
		return "unreadable: " + err.Error()
	}
	slices.Sort(names)
	h := sha256.New()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return "unreadable: " + err.Error()
		}
		// The name and the length first, so that no two sets of files
		// hash alike by shifting bytes from one file into the next.
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(data))))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
