//go:build !linux

package demo

import (
	"context"
	"errors"
)

// Run fails: the demo drives the Linux emulation backend (Wine). On a
// Windows node, follow install/README.md instead.
func Run(ctx context.Context, cfg Config) error {
	return errors.New("winproc-demo runs on Linux only (it drives the Wine emulation); on a Windows node follow install/README.md")
}
