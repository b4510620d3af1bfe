//go:build !windows

package main

import "context"

// runAsService reports that there is no service manager to run under.
func runAsService(func(ctx context.Context) error) (bool, error) { return false, nil }
