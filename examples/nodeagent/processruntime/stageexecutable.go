package processruntime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// StageExecutableName is the file LocateStageExecutable looks for beside
// the running program: cmd/podkit-stages, as go build names it.
const StageExecutableName = "podkit-stages"

// stageCheckTimeout bounds each run of a stage program by
// CheckStageExecutable.
const stageCheckTimeout = 10 * time.Second

// maxDigestAnswer bounds what CheckStageExecutable reads of a stage
// program's answer: a digest and a newline, with room to spare.
const maxDigestAnswer = 256

// CheckStageExecutable says whether path may be Options.StageExecutable,
// and if not why: it must be an absolute path of a regular, executable
// file that only its owner, root or this process's user, may change (the
// file and its directory writable by no group and no one else: its setup
// stage runs as this process's user, root for a sandbox), and built from
// the same source of the sandbox and the log shim as this program: it is
// run twice (each run bounded by 10 s) and must answer both packages'
// source digests as this program has them. Open calls it for
// Options.StageExecutable; callers may, to choose one. Safe to call from
// any goroutine; ctx bounds the runs.
func CheckStageExecutable(ctx context.Context, path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("processruntime: StageExecutable %q is not an absolute path", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("processruntime: StageExecutable %q: %w", path, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("processruntime: StageExecutable %q is not an executable file (mode %v)", path, fi.Mode())
	}
	if err := ownedHere(fi); err != nil {
		return fmt.Errorf("processruntime: StageExecutable %q %w", path, err)
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("processruntime: StageExecutable %q: its directory: %w", path, err)
	}
	if err := ownedHere(di); err != nil {
		return fmt.Errorf("processruntime: StageExecutable %q: its directory %q %w", path, dir, err)
	}
	for _, q := range []struct{ what, env, want string }{
		{"sandbox", sandbox.MarkerEnv + "=" + sandbox.StageSourceDigest, sandbox.SourceDigest()},
		{"log shim", logshim.MarkerEnv + "=" + logshim.SourceDigestMarker, logshim.SourceDigest()},
	} {
		got, err := askDigest(ctx, path, q.env)
		if err != nil {
			return fmt.Errorf("processruntime: StageExecutable %q does not answer its %s source's digest (is it cmd/podkit-stages?): %w", path, q.what, err)
		}
		if got != q.want {
			return fmt.Errorf("processruntime: StageExecutable %q was built from another source of the %s than this program (digest %.12s, this program's %.12s): build both from the same source", path, q.what, got, q.want)
		}
	}
	return nil
}

// ownedHere says why the file or directory of info fi could be changed by
// someone other than root or this process's user, if it could, as the end
// of a sentence naming it ("is writable by ...").
func ownedHere(fi fs.FileInfo) error {
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("is writable by its group or others (mode %v)", fi.Mode().Perm())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("has no owner to check")
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("belongs to user %d, neither root nor this process's user", st.Uid)
	}
	return nil
}

// askDigest runs path with env alone and returns the first line of its
// standard output.
func askDigest(ctx context.Context, path, env string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, stageCheckTimeout)
	defer cancel()
	out, errOut := &cappedOutput{max: maxDigestAnswer}, &cappedOutput{max: maxDigestAnswer}
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = []string{env, "GORACE=atexit_sleep_ms=0"}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = out, errOut
	// The pipes' copies end with the program, not with any child it
	// left holding them.
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(string(errOut.bytes())); msg != "" {
			return "", fmt.Errorf("%w: %s", err, msg)
		}
		return "", err
	}
	line, _, _ := strings.Cut(string(out.bytes()), "\n")
	if line == "" {
		return "", errors.New("it printed nothing")
	}
	return line, nil
}

// LocateStageExecutable returns the StageExecutableName beside the
// running program (in the directory of os.Executable, its symbolic links
// resolved) when there is one and CheckStageExecutable accepts it; "" and
// no error when there is none; "" and CheckStageExecutable's error when
// there is one it refuses. An agent installed with cmd/podkit-stages
// beside it (go build -o DIR/ of both) runs its pods' stages from it by
// default this way. Safe to call from any goroutine; ctx bounds the
// check.
func LocateStageExecutable(ctx context.Context) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("processruntime: finding this program's executable: %w", err)
	}
	return locateBeside(ctx, self)
}

// locateBeside is LocateStageExecutable for the program at self.
func locateBeside(ctx context.Context, self string) (string, error) {
	if resolved, err := filepath.EvalSymlinks(self); err == nil {
		self = resolved
	}
	path := filepath.Join(filepath.Dir(self), StageExecutableName)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err := CheckStageExecutable(ctx, path); err != nil {
		return "", err
	}
	return path, nil
}
