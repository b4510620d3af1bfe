//go:build !windows

package service

import (
	"errors"
	"net"
	"os"
	"path/filepath"
)

// listen opens a unix socket only root can use, replacing a stale socket
// file a previous run left behind.
func listen(address string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(address), 0o700); err != nil {
		return nil, err
	}
	if err := os.Remove(address); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", address)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(address, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
