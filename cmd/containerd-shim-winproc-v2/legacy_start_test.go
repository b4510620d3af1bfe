package main

import (
	"testing"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// containerd 1.7's command line for `start` (runtime/v2/shim/util.go
// Command, runtime/v2/binary.go Start).
var legacyArgs = []string{"-namespace", "k8s.io", "-address", "/run/containerd/containerd.sock", "-publish-binary", "/usr/bin/containerd", "-id", "task1", "-debug", "start"}

func TestParseStart(t *testing.T) {
	a, ok := parseStart(legacyArgs)
	want := startArgs{namespace: "k8s.io", id: "task1", address: "/run/containerd/containerd.sock", publishBinary: "/usr/bin/containerd", debug: true}
	if !ok || a != want {
		t.Fatalf("parseStart = %+v, %v; want %+v, true", a, ok, want)
	}
	for _, args := range [][]string{
		{"-namespace", "k8s.io", "-id", "task1", "-bundle", "/b", "delete"},
		{"-namespace", "k8s.io", "-id", "task1"},
		{"-id", "task1", "start"},             // pkg/shim refuses an empty namespace
		{"-v"},                                // and prints the version
		{"-info", "-namespace", "n", "start"}, // or the info
	} {
		if a, ok := parseStart(args); ok {
			t.Errorf("parseStart(%q) = %+v, true; want pkg/shim to handle it", args, a)
		}
	}
}

// marshalOptions is stdin as containerd 1.7 writes it: a protobuf Any whose
// type URL typeurl names by the message's full name.
func marshalOptions(t *testing.T, body string) []byte {
	t.Helper()
	v, err := proto.Marshal(&runtimeoptions.Options{ConfigBody: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(&anypb.Any{TypeUrl: "runtimeoptions.v1.Options", Value: v})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLegacyParams(t *testing.T) {
	a, _ := parseStart(legacyArgs)

	t.Run("no options", func(t *testing.T) {
		p, legacy, err := legacyParams(a, nil, "/run/containerd/containerd.sock.ttrpc")
		if err != nil || !legacy {
			t.Fatalf("legacyParams = %v, %v, %v", p, legacy, err)
		}
		want := &bootapi.BootstrapParams{
			InstanceID:             "task1",
			Namespace:              "k8s.io",
			LogLevel:               bootapi.LogLevel_LOG_LEVEL_DEBUG,
			ContainerdGrpcAddress:  "/run/containerd/containerd.sock",
			ContainerdTtrpcAddress: "/run/containerd/containerd.sock.ttrpc",
			ContainerdBinary:       "/usr/bin/containerd",
		}
		if !proto.Equal(p, want) {
			t.Fatalf("legacyParams = %v; want %v", p, want)
		}
	})

	t.Run("runtime options", func(t *testing.T) {
		p, legacy, err := legacyParams(a, marshalOptions(t, "pause_image = \"x\"\n"), "")
		if err != nil || !legacy {
			t.Fatalf("legacyParams = %v, %v, %v", p, legacy, err)
		}
		var ro runtimeoptions.Options
		if found, err := p.FindExtension(&ro); !found || err != nil || string(ro.GetConfigBody()) != "pause_image = \"x\"\n" {
			t.Fatalf("FindExtension = %v, %v, %q", found, err, ro.GetConfigBody())
		}
	})

	t.Run("info level", func(t *testing.T) {
		b := a
		b.debug = false
		p, _, err := legacyParams(b, nil, "")
		if err != nil || p.GetLogLevel() != bootapi.LogLevel_LOG_LEVEL_INFO {
			t.Fatalf("legacyParams = %v, %v; want info level", p, err)
		}
	})

	t.Run("bootstrap params", func(t *testing.T) {
		in, err := proto.Marshal(&bootapi.BootstrapParams{InstanceID: "task1", Namespace: "k8s.io"})
		if err != nil {
			t.Fatal(err)
		}
		if p, legacy, err := legacyParams(a, in, ""); legacy || err != nil {
			t.Fatalf("legacyParams = %v, %v, %v; want bootstrap params left to pkg/shim", p, legacy, err)
		}
	})

	t.Run("garbage", func(t *testing.T) {
		if p, _, err := legacyParams(a, []byte{0xff, 0xff}, ""); err == nil {
			t.Fatalf("legacyParams = %v; want an error", p)
		}
	})
}
