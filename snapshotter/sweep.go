package snapshotter

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/log"
)

// The sweep destroys what removals left (directories the layer driver
// refused: removal.go) once the layer is released, without waiting for
// containerd's next garbage collection. It runs Cleanup: first sweepFirst
// after a removal left something, then at doubling intervals up to
// sweepMax until nothing is left; then it waits for the next removal that
// leaves something. The snapshotter starts it and its Close ends it.
const (
	sweepFirst = time.Second
	sweepMax   = time.Minute
	// sweepCloseWait bounds Close's wait for a sweep in a layer call.
	sweepCloseWait = 10 * time.Second
)

// sweepTimes are the sweep's first interval and its longest.
type sweepTimes struct{ first, max time.Duration }

type sweeper struct {
	sweep func(context.Context) error
	every sweepTimes
	wakec chan struct{}
	// closeWait bounds stop's wait (sweepCloseWait).
	closeWait time.Duration
	cancel    context.CancelFunc
	done      chan struct{}
}

// startSweep starts the sweep; pending says an earlier sweep (the one at
// start) left something.
func startSweep(ctx context.Context, sweep func(context.Context) error, every sweepTimes, pending bool) *sweeper {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &sweeper{sweep: sweep, every: every, wakec: make(chan struct{}, 1), closeWait: sweepCloseWait, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, pending)
	return w
}

// wake tells the sweep a removal left something: it sweeps after its first
// interval again.
func (w *sweeper) wake() {
	select {
	case w.wakec <- struct{}{}:
	default:
	}
}

func (w *sweeper) run(ctx context.Context, pending bool) {
	defer close(w.done)
	interval := w.every.first
	timer := time.NewTimer(interval)
	defer timer.Stop()
	if !pending {
		timer.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wakec:
			interval = w.every.first
			timer.Reset(interval)
		case <-timer.C:
			err := w.sweep(ctx)
			if err == nil {
				interval = w.every.first
				continue
			}
			if ctx.Err() != nil {
				return
			}
			interval = min(2*interval, w.every.max)
			log.G(ctx).WithError(err).WithField("next", interval).Info("removed snapshots still held; sweeping again later")
			timer.Reset(interval)
		}
	}
}

// stop ends the sweep, waiting for a sweep under way at most closeWait.
func (w *sweeper) stop() error {
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-time.After(w.closeWait):
		return fmt.Errorf("the snapshot sweep did not end within %s: a layer call is hanging", w.closeWait)
	}
}
