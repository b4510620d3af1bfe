package hcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// fullSettings sets every field of compute.Settings to a distinct value.
func fullSettings() *compute.Settings {
	return &compute.Settings{
		Layers: compute.Layers{
			Scratch: `C:\state\snapshots\42`,
			Parents: []string{`C:\state\snapshots\41`, `C:\state\snapshots\7\`},
		},
		MappedDirectories: []compute.MappedDirectory{
			{HostPath: `C:\data`, ContainerPath: `C:\data`, ReadOnly: true},
			{HostPath: `D:\logs`, ContainerPath: `E:`},
		},
		MappedPipes: []compute.MappedPipe{{HostPath: `\\.\pipe\docker_engine`, ContainerPipeName: "docker_engine"}},
		Resources: compute.Resources{
			CPUCount:                2,
			CPUMaximum:              0, // at most one of the three; see resourceCases
			CPUWeight:               0,
			MemoryLimitBytes:        512<<20 + 1,
			StorageIOPSMaximum:      300,
			StorageBandwidthMaximum: 40 << 20,
		},
		SandboxSizeBytes: 40 << 30,
		HostName:         "web-0",
		Network: compute.Network{
			Namespace:                "ns-1",
			Endpoints:                []string{"EP-A"},
			SharedContainerName:      "pause-1",
			DNSSearchList:            []string{"default.svc.cluster.local", "svc.cluster.local"},
			AllowUnqualifiedDNSQuery: true,
		},
		CredentialSpec:  `{"CmsPlugins":["ActiveDirectory"]}`,
		AssignedDevices: []compute.Device{{Kind: compute.DeviceClass, ID: "5B45201D-F2F2-4F3B-85BB-30FF1F953599"}},
	}
}

func TestCheckSettings(t *testing.T) {
	ok := func() *compute.Settings { return fullSettings() }
	cases := []struct {
		name   string
		change func(*compute.Settings)
		build  uint16
		class  func(error) bool
	}{
		{"valid", func(*compute.Settings) {}, 20348, nil},
		{"1809", func(*compute.Settings) {}, 17763, nil},
		{"before 1809", func(*compute.Settings) {}, 17134, errdefs.IsNotImplemented},
		{"affinity in group 0 on 1809", func(s *compute.Settings) {
			s.Resources.CPUAffinity = []compute.CPUGroupAffinity{{Mask: 1}}
		}, 17763, nil},
		{"affinity in group 1 on 1809", func(s *compute.Settings) {
			s.Resources.CPUAffinity = []compute.CPUGroupAffinity{{Mask: 1, Group: 1}}
		}, 17763, errdefs.IsNotImplemented},
		{"affinity in two groups on 2022", func(s *compute.Settings) {
			s.Resources.CPUAffinity = []compute.CPUGroupAffinity{{Mask: 1}, {Mask: 1, Group: 1}}
		}, 20348, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.change(s)
			err := checkSettings(s, tc.build)
			switch {
			case tc.class == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.class != nil && (err == nil || !tc.class(err)):
				t.Fatalf("error %v is not of the expected class", err)
			}
		})
	}
	if err := checkSettings(nil, 20348); !errdefs.IsInvalidArgument(err) {
		t.Errorf("nil settings: %v", err)
	}
	err := checkSettings(&compute.Settings{Layers: compute.Layers{Scratch: "s", Parents: []string{"p"}}}, 14393)
	if !errors.Is(err, compute.ErrNotSupported) {
		t.Errorf("an old host is not ErrNotSupported: %v", err)
	}
}

func TestLayerName(t *testing.T) {
	for in, want := range map[string]string{
		`C:\ProgramData\containerd\snapshots\12`:  "12",
		`C:\ProgramData\containerd\snapshots\12\`: "12",
		`C:/a/b`:   "b",
		`layer`:    "layer",
		`\\?\C:\x`: "x",
	} {
		if got := layerName(in); got != want {
			t.Errorf("layerName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProcessParameters(t *testing.T) {
	r := strings.NewReader("")
	var w bytes.Buffer
	base := compute.ProcessSettings{
		CommandLine:      `cmd /c "echo hi"`,
		WorkingDirectory: `C:\app`,
		User:             "ContainerUser",
		Env:              []string{"A=1", "B=2"},
	}
	cases := []struct {
		name   string
		change func(*compute.ProcessSettings)
		want   schema2.ProcessParameters
	}{
		{"no streams", func(*compute.ProcessSettings) {}, schema2.ProcessParameters{}},
		{"stdin", func(p *compute.ProcessSettings) { p.Stdin = r }, schema2.ProcessParameters{CreateStdInPipe: true}},
		{"stdout", func(p *compute.ProcessSettings) { p.Stdout = &w }, schema2.ProcessParameters{CreateStdOutPipe: true}},
		{"stderr", func(p *compute.ProcessSettings) { p.Stderr = &w }, schema2.ProcessParameters{CreateStdErrPipe: true}},
		{"all", func(p *compute.ProcessSettings) { p.Stdin, p.Stdout, p.Stderr = r, &w, &w }, schema2.ProcessParameters{CreateStdInPipe: true, CreateStdOutPipe: true, CreateStdErrPipe: true}},
		{"terminal drops stderr", func(p *compute.ProcessSettings) {
			p.Terminal = true
			p.Stdin, p.Stdout, p.Stderr = r, &w, &w
			p.ConsoleWidth, p.ConsoleHeight = 120, 30
		}, schema2.ProcessParameters{EmulateConsole: true, CreateStdInPipe: true, CreateStdOutPipe: true, ConsoleSize: []int32{30, 120}}},
		{"terminal default size", func(p *compute.ProcessSettings) { p.Terminal = true }, schema2.ProcessParameters{EmulateConsole: true}},
		{"size without terminal ignored", func(p *compute.ProcessSettings) { p.ConsoleWidth, p.ConsoleHeight = 80, 25 }, schema2.ProcessParameters{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			tc.change(&p)
			got, err := processParameters(&p)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.CommandLine, want.WorkingDirectory, want.User = base.CommandLine, base.WorkingDirectory, base.User
			want.Environment = map[string]string{"A": "1", "B": "2"}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("got  %+v\nwant %+v", *got, want)
			}
		})
	}
	if _, err := processParameters(&compute.ProcessSettings{}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("empty command line: %v", err)
	}
	if _, err := processParameters(nil); !errdefs.IsInvalidArgument(err) {
		t.Errorf("nil settings: %v", err)
	}
	for _, ps := range []compute.ProcessSettings{
		{CommandLine: "app.exe " + strings.Repeat("x", 32760)},
		{CommandLine: "app.exe", Env: []string{"BIG=" + strings.Repeat("x", 32768)}},
		{CommandLine: "app.exe", Env: []string{"A=b\x00"}},
	} {
		_, err := processParameters(&ps)
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "CRI") {
			t.Errorf("past Windows' limits: %v", err)
		}
	}
}

func TestProcessParametersJSON(t *testing.T) {
	c, err := processParameters(&compute.ProcessSettings{
		CommandLine: "ping -t localhost", WorkingDirectory: `C:\`, User: `NT AUTHORITY\SYSTEM`,
		Env: []string{"PATH=C:\\Windows"}, Terminal: true, ConsoleWidth: 100, ConsoleHeight: 40,
		Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(c)
	want := `{"CommandLine":"ping -t localhost","User":"NT AUTHORITY\\SYSTEM","WorkingDirectory":"C:\\","Environment":{"PATH":"C:\\Windows"},"EmulateConsole":true,"CreateStdInPipe":true,"CreateStdOutPipe":true,"ConsoleSize":[40,100]}`
	if string(got) != want {
		t.Errorf("process document:\n got %s\nwant %s", got, want)
	}
}

func TestEnvironment(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want map[string]string
	}{
		{"none", nil, nil},
		{"plain", []string{"A=1", "B=x=y"}, map[string]string{"A": "1", "B": "x=y"}},
		{"later wins", []string{"A=1", "A=2"}, map[string]string{"A": "2"}},
		{"case-insensitive, later spelling", []string{"Path=a", "PATH=b"}, map[string]string{"PATH": "b"}},
		{"empty unsets", []string{"A=1", "a=", "B=2"}, map[string]string{"B": "2"}},
		{"empty alone", []string{"A="}, nil},
		{"set again after unset", []string{"A=1", "A=", "a=3"}, map[string]string{"a": "3"}},
		{"malformed skipped", []string{"NOEQUALS", "=C:=C:\\", "X=1"}, map[string]string{"X": "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := environment(tc.env); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("environment(%q) = %v, want %v", tc.env, got, tc.want)
			}
		})
	}
}
