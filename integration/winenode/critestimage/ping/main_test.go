package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args  []string
		want  options
		error bool
	}{
		{[]string{"-t", "localhost"}, options{host: "localhost"}, false},
		{[]string{"localhost"}, options{host: "localhost", count: 4}, false},
		{[]string{"-n", "2", "localhost"}, options{host: "localhost", count: 2}, false},
		{[]string{"-t"}, options{}, true},
		{[]string{"-x", "localhost"}, options{}, true},
		{[]string{"-n", "0", "localhost"}, options{}, true},
	}
	for _, tt := range tests {
		got, err := parse(tt.args)
		if (err != nil) != tt.error || (err == nil && got != tt.want) {
			t.Errorf("parse(%q) = %+v, %v", tt.args, got, err)
		}
	}
}

func TestPing(t *testing.T) {
	replies := func(string, time.Duration) (time.Duration, error) { return time.Millisecond, nil }
	timeouts := func(string, time.Duration) (time.Duration, error) { return 0, errors.New("timed out") }
	var out bytes.Buffer
	if code := ping(options{host: "localhost", count: 2}, replies, &out, nil, time.Millisecond); code != 0 || strings.Count(out.String(), "Reply from localhost") != 2 {
		t.Errorf("two replies: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := ping(options{host: "localhost", count: 2}, timeouts, &out, nil, time.Millisecond); code != 1 || strings.Count(out.String(), "Request timed out") != 2 {
		t.Errorf("no replies: exit %d\n%s", code, out.String())
	}
	// -t pings until a console control event.
	out.Reset()
	events := make(chan os.Signal, 1)
	done := make(chan int)
	go func() { done <- ping(options{host: "localhost"}, replies, &out, events, time.Millisecond) }()
	time.Sleep(50 * time.Millisecond)
	events <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != 0xC000013A || !strings.Contains(out.String(), "Ping statistics") {
			t.Errorf("-t at an event: exit %#x\n%s", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("-t did not end at the event")
	}
}
