// Command ping is the conformance image's ping.exe (see package
// critestimage): `ping [-t] [-n COUNT] HOST` sends ICMP echo requests to
// HOST, one a second, COUNT of them (4 by default, without end with -t),
// writes a line for each reply or timeout and the statistics at the end
// or at a console control event, as Windows' ping.exe does.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// echoer sends one echo request and returns the round trip.
type echoer func(host string, timeout time.Duration) (time.Duration, error)

type options struct {
	host  string
	count int // 0: without end
}

func parse(args []string) (options, error) {
	o := options{count: 4}
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-t", "/t":
			o.count = 0
		case "-n", "/n":
			if i+1 == len(args) {
				return o, fmt.Errorf("-n needs a count")
			}
			n, err := strconv.Atoi(args[i+1])
			if err != nil || n < 1 {
				return o, fmt.Errorf("bad value for -n: %q", args[i+1])
			}
			o.count, i = n, i+1
		default:
			if o.host != "" || args[i] == "" || args[i][0] == '-' || args[i][0] == '/' {
				return o, fmt.Errorf("bad argument %q", args[i])
			}
			o.host = args[i]
		}
	}
	if o.host == "" {
		return o, fmt.Errorf("no host to ping")
	}
	return o, nil
}

// ping sends the requests until the count or an event; exit status 0 when
// a reply came, 1 when none did, as Windows' ping.exe.
func ping(o options, echo echoer, out io.Writer, events <-chan os.Signal, interval time.Duration) int {
	fmt.Fprintf(out, "\r\nPinging %s with 32 bytes of data:\r\n", o.host)
	sent, received := 0, 0
	for o.count == 0 || sent < o.count {
		rtt, err := echo(o.host, 4*time.Second)
		sent++
		if err != nil {
			fmt.Fprintf(out, "Request timed out. (%v)\r\n", err)
		} else {
			received++
			fmt.Fprintf(out, "Reply from %s: bytes=32 time=%dms\r\n", o.host, rtt.Milliseconds())
		}
		if o.count != 0 && sent == o.count {
			break
		}
		select {
		case <-events:
			stats(out, o.host, sent, received)
			return 0xC000013A // STATUS_CONTROL_C_EXIT, as after Ctrl+C
		case <-time.After(interval):
		}
	}
	stats(out, o.host, sent, received)
	if received == 0 {
		return 1
	}
	return 0
}

func stats(out io.Writer, host string, sent, received int) {
	fmt.Fprintf(out, "\r\nPing statistics for %s:\r\n    Packets: Sent = %d, Received = %d, Lost = %d\r\n", host, sent, received, sent-received)
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "ping: %v\r\nusage: ping [-t] [-n count] host\r\n", err)
		os.Exit(1)
	}
	events := make(chan os.Signal, 1)
	signal.Notify(events, os.Interrupt, syscall.SIGTERM)
	os.Exit(ping(o, icmpEcho, os.Stdout, events, time.Second))
}
