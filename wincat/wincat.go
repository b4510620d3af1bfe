// Package wincat relays a TCP connection over standard input and output.
//
// It is the port-forward helper in the pod's pause image: containerd runs
// `wincat.exe 127.0.0.1 <port>` inside a Windows pod and carries the
// forwarded stream on the process's stdin and stdout. It is a drop-in for
// Kubernetes' wincat that also reaches IPv6-only listeners on localhost,
// half-closes the connection when stdin ends, does not hang once the remote
// side has closed, and reports failures in its exit status.
package wincat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

const usage = "usage: wincat <host> <port>"

// Run runs wincat with args (without the program name) and returns the
// process exit status: 0 when the relay finished cleanly, 1 otherwise, with
// one line on stderr saying why.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, usage)
		return 1
	}
	conn, err := Dial(ctx, args[0], args[1])
	if err != nil {
		return fail(stderr, err)
	}
	if err := Relay(ctx, conn, stdin, stdout); err != nil {
		return fail(stderr, err)
	}
	return 0
}

// fail reports err on one line, so that each failure is one log record.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "wincat: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	return 1
}

// Dial connects to port on host over TCP.
//
// The host "localhost" means 127.0.0.1 and then ::1, so that listeners bound
// only to the IPv6 loopback are reached too. Other names are resolved and
// every address is tried in turn. When no address accepts, the error names
// each address tried and why it failed.
func Dial(ctx context.Context, host, port string) (*net.TCPConn, error) {
	p, err := parsePort(port)
	if err != nil {
		return nil, err
	}
	addrs, err := resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	var errs dialErrors
	for _, ip := range addrs {
		addr := net.JoinHostPort(ip.String(), p)
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.(*net.TCPConn), nil
		}
		errs = append(errs, &ConnectError{Addr: addr, Err: err})
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errs
}

// parsePort checks that s is a port number from 1 to 65535 and returns it in
// canonical form.
func parsePort(s string) (string, error) {
	// Base 10 rejects signs, prefixes and underscores, which Atoi or base 0
	// would let through.
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return "", fmt.Errorf("invalid port %q: want a number from 1 to 65535", s)
	}
	return strconv.FormatUint(n, 10), nil
}

// resolve returns the addresses to try for host, in order.
func resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	// Accept "[::1]" as well as "::1": people copy addresses from URLs.
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	switch {
	case host == "":
		return nil, errors.New("invalid host: empty")
	case strings.EqualFold(host, "localhost"):
		// Not resolved: the hosts file may list only one of the two, and the
		// IPv4 loopback first matches what Kubernetes' wincat did.
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err // a *net.DNSError, which names the host
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("lookup %s: no addresses", host)
	}
	for i, a := range addrs {
		// The Go resolver may return IPv4 addresses in IPv6 form, which
		// would print as [::ffff:127.0.0.1] in messages.
		addrs[i] = a.Unmap()
	}
	return addrs, nil
}

// A ConnectError reports that connecting to one address failed.
type ConnectError struct {
	Addr string // host:port dialled
	Err  error  // as returned by net.Dialer
}

// Error names the address and only the underlying cause: the *net.OpError
// from the dialer would repeat the address and add noise like "dial tcp".
func (e *ConnectError) Error() string {
	return "connect " + e.Addr + ": " + cause(e.Err).Error()
}

func (e *ConnectError) Unwrap() error { return e.Err }

// cause strips the net and syscall wrappers from a dial error.
func cause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	var sc *os.SyscallError
	if errors.As(err, &sc) && sc.Err != nil {
		err = sc.Err
	}
	return err
}

// dialErrors holds one error per address tried. Unlike errors.Join it
// prints on one line.
type dialErrors []error

func (e dialErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e dialErrors) Unwrap() []error { return e }
