package compute

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/errdefs"
)

// Teardown ends what is left of the compute system id once no shim serves
// it: it opens the system, terminates it, waits for it to stop (until ctx
// ends) and closes it, which releases what the backend held for it, and
// waits for the backend's background teardowns (Drainer). It is
// the shim's `delete` after a dead shim, and a sweep of orphans. A system
// that is no longer there is no error.
func Teardown(ctx context.Context, b Backend, id string) error {
	sys, err := b.Open(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open compute system %s: %w", id, err)
	}
	var errs []error
	if err := sys.Terminate(ctx); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("terminate compute system %s: %w", id, err))
	}
	select {
	case <-sys.Wait():
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("compute system %s did not stop: %w", id, ctx.Err()))
	}
	if err := sys.Close(); err != nil {
		errs = append(errs, fmt.Errorf("release compute system %s: %w", id, err))
	}
	// A teardown Close carried on in the background ends before this
	// does: what called it (a delete, a sweep) leaves nothing behind.
	if d, ok := b.(Drainer); ok {
		if err := d.Drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("tear down compute system %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
