package sandbox

import (
	"embed"
	"sync"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sourcedigest"
)

// sources are this package's Go files: the same in the agent and in a
// stage program built from the same source.
//
//go:embed *.go
var sources embed.FS

// SourceDigest is the digest of this package's source (package
// sourcedigest), computed once: a program linking this package prints it when run
// with MarkerEnv set to StageSourceDigest, and a runtime whose own
// differs must not run that program's stages.
var SourceDigest = sync.OnceValue(func() string { return sourcedigest.Of(sources) })
