// Command wincat relays a TCP connection over its standard input and output.
// It is the port-forward helper in Windows pod sandboxes: containerd runs
// `wincat.exe 127.0.0.1 <port>` in the pod and carries the stream on stdio.
//
// usage: wincat <host> <port>
//
// It exits 0 when both directions finished cleanly and 1, with one line on
// stderr, otherwise. See package github.com/winproc/winproc/wincat.
package main

import (
	"context"
	"os"

	"github.com/winproc/winproc/wincat"
)

func main() {
	// No signal handling: the default (exit) is right, and the system
	// closes the connection.
	os.Exit(wincat.Run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
