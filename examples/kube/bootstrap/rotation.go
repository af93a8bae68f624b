package bootstrap

import (
	"context"
	"errors"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
)

// rotation is the life of one certificate manager: built over ctx (its
// Config.Ctx), run once, closed once or more.
type rotation struct {
	// what names the owner in errors: "Client", "Serving".
	what    string
	manager certificate.Manager
	ctx     context.Context
	cancel  context.CancelFunc

	mu  sync.Mutex
	ran bool
}

// newRotation returns a rotation whose context carries log; set manager.
func newRotation(what string, log logr.Logger) *rotation {
	r := &rotation{what: what}
	r.ctx, r.cancel = context.WithCancel(klog.NewContext(context.Background(), log))
	return r
}

// run starts the manager and blocks until ctx ends, then closes it.
func (r *rotation) run(ctx context.Context) error {
	r.mu.Lock()
	if r.ran {
		r.mu.Unlock()
		return errors.New("bootstrap: " + r.what + ".Run called twice")
	}
	r.ran = true
	r.mu.Unlock()
	defer r.close()
	r.manager.Start()
	<-ctx.Done()
	return nil
}

// close stops the manager; idempotent.
func (r *rotation) close() {
	if r.manager != nil {
		r.manager.Stop()
	}
	r.cancel()
}
