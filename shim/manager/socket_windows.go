package manager

import "context"

// SocketCleanup is nil on Windows: the shim serves on a named pipe, which
// goes with its last handle.
func SocketCleanup() func(context.Context) error { return nil }

// removeDeadSocket has nothing to remove on Windows: a named pipe goes
// with the shim that served it.
func removeDeadSocket(context.Context, string) error { return nil }
