package cmdutil

import (
	"context"
	"fmt"

	"github.com/walctl/walctl/internal/core/dirlock"
	"github.com/walctl/walctl/internal/core/errs"
)

// ErrHolderGone means the process whose embedded etcd or in-process WAL this
// command was using has exited. It is in the ErrUnavailable category.
var ErrHolderGone = fmt.Errorf("the walctl process serving this data dir has exited: %w", errs.ErrUnavailable)

// holder is a directory held by another process whose server this command
// talks to instead of opening the directory (DESIGN.md §3 rule 11).
type holder struct {
	what, dir, pid string
}

// borrow records that the command uses the server of the process holding
// dir. Called with f.mu held.
func (f *Factory) borrow(what, dir string) {
	for _, h := range f.holders {
		if h.dir == dir {
			return
		}
	}
	f.holders = append(f.holders, holder{what: what, dir: dir, pid: dirlock.Holder(dir)})
}

// WithHolders returns a context derived from ctx that is cancelled, with a
// cause wrapping ErrHolderGone that names the directory and the pid, when a
// process whose embedded etcd or WAL this command borrowed exits. Call it
// after the dependencies are built; without borrowed ones it only derives.
//
// A long-running command (`worker run`) stops on it and exits 5 rather than
// take the embedded parts over. Taking over would mean reopening etcd and
// the WAL inside a running worker, on the dead holder's ports (which another
// process may have taken meanwhile), under a publisher and clients built on
// them — a second start-up path that only this rare case would exercise.
// Exiting hands the same outcome to the supervisor through the ordinary,
// tested start-up path: restarted, the worker finds the directories free
// and opens them itself. Idling on a dead port for ever is the one thing
// it must not do (issue 13 item 2).
func (f *Factory) WithHolders(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	f.mu.Lock()
	holders := append([]holder(nil), f.holders...)
	f.mu.Unlock()
	for _, h := range holders {
		gone, err := dirlock.WaitReleased(h.dir)
		if err != nil {
			cancel(fmt.Errorf("%s of pid %s in %s cannot be watched: %v: %w", h.what, h.pid, h.dir, err, ErrHolderGone))
			break
		}
		go func() {
			select {
			case <-gone:
				cancel(fmt.Errorf("pid %s, whose %s in %s this command was using, has exited; run the command again to open it itself: %w",
					h.pid, h.what, h.dir, ErrHolderGone))
			case <-ctx.Done():
			}
		}()
	}
	return ctx, func() { cancel(context.Canceled) }
}
