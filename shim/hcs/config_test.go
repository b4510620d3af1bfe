package hcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
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
		CredentialSpec:          `{"CmsPlugins":["ActiveDirectory"]}`,
		AssignedDevices:         []compute.Device{{Kind: compute.DeviceClass, ID: "5B45201D-F2F2-4F3B-85BB-30FF1F953599"}},
		IgnoreFlushesDuringBoot: true,
	}
}

// TestContainerConfigJSON pins the whole document HCS receives for
// fullSettings, names included.
func TestContainerConfigJSON(t *testing.T) {
	s := fullSettings()
	layers := []layerRef{{ID: "guid-41", Path: s.Layers.Parents[0]}, {ID: "guid-7", Path: s.Layers.Parents[1]}}
	c := buildContainerConfig("ctr-1", s, layers, []string{"EP-A", "ep-b"})
	c.VolumePath = volumePath(`\\?\Volume{11111111-2222-3333-4444-555555555555}\`)
	got, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
		"SystemType": "Container",
		"Name": "ctr-1",
		"Owner": "winproc",
		"VolumePath": "\\\\?\\Volume{11111111-2222-3333-4444-555555555555}",
		"IgnoreFlushesDuringBoot": true,
		"LayerFolderPath": "C:\\state\\snapshots\\42",
		"Layers": [
			{"ID": "guid-41", "Path": "C:\\state\\snapshots\\41"},
			{"ID": "guid-7", "Path": "C:\\state\\snapshots\\7\\"}
		],
		"Credentials": "{\"CmsPlugins\":[\"ActiveDirectory\"]}",
		"ProcessorCount": 2,
		"StorageIOPSMaximum": 300,
		"StorageBandwidthMaximum": 41943040,
		"StorageSandboxSize": 42949672960,
		"MemoryMaximumInMB": 513,
		"HostName": "web-0",
		"MappedDirectories": [
			{"HostPath": "C:\\data", "ContainerPath": "C:\\data", "ReadOnly": true, "BandwidthMaximum": 0, "IOPSMaximum": 0, "CreateInUtilityVM": false},
			{"HostPath": "D:\\logs", "ContainerPath": "E:", "ReadOnly": false, "BandwidthMaximum": 0, "IOPSMaximum": 0, "CreateInUtilityVM": false}
		],
		"MappedPipes": [{"HostPath": "\\\\.\\pipe\\docker_engine", "ContainerPipeName": "docker_engine"}],
		"HvPartition": false,
		"NetworkSharedContainerName": "pause-1",
		"EndpointList": ["EP-A", "ep-b"],
		"AllowUnqualifiedDNSQuery": true,
		"DNSSearchList": "default.svc.cluster.local,svc.cluster.local",
		"AssignedDevices": [{"InterfaceClassGuid": "5B45201D-F2F2-4F3B-85BB-30FF1F953599"}]
	}`
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(want)); err != nil {
		t.Fatal(err)
	}
	if string(got) != compact.String() {
		t.Errorf("container document:\n got %s\nwant %s", got, compact.String())
	}
}

// TestContainerConfigFields changes one Settings field at a time and checks
// that exactly the schema-v1 field it maps to changes, to the value
// expected.
func TestContainerConfigFields(t *testing.T) {
	minimal := func() *compute.Settings {
		return &compute.Settings{Layers: compute.Layers{Scratch: `C:\s`, Parents: []string{`C:\base`}}}
	}
	cases := []struct {
		name   string
		change func(*compute.Settings)
		field  string // JSON name in the document
		want   any    // its JSON value
	}{
		{"scratch", func(s *compute.Settings) { s.Layers.Scratch = `C:\x\scratch` }, "LayerFolderPath", `C:\x\scratch`},
		{"mapped directory", func(s *compute.Settings) {
			s.MappedDirectories = []compute.MappedDirectory{{HostPath: `C:\h`, ContainerPath: `C:\c`, ReadOnly: true}}
		}, "MappedDirectories", []any{map[string]any{"HostPath": `C:\h`, "ContainerPath": `C:\c`, "ReadOnly": true, "BandwidthMaximum": 0.0, "IOPSMaximum": 0.0, "CreateInUtilityVM": false}}},
		{"mapped pipe", func(s *compute.Settings) {
			s.MappedPipes = []compute.MappedPipe{{HostPath: `\\.\pipe\a`, ContainerPipeName: "b"}}
		}, "MappedPipes", []any{map[string]any{"HostPath": `\\.\pipe\a`, "ContainerPipeName": "b"}}},
		{"cpu count", func(s *compute.Settings) { s.Resources.CPUCount = 3 }, "ProcessorCount", 3.0},
		{"cpu maximum", func(s *compute.Settings) { s.Resources.CPUMaximum = 2500 }, "ProcessorMaximum", 2500.0},
		{"cpu weight", func(s *compute.Settings) { s.Resources.CPUWeight = 700 }, "ProcessorWeight", 700.0},
		{"memory exact MiB", func(s *compute.Settings) { s.Resources.MemoryLimitBytes = 256 << 20 }, "MemoryMaximumInMB", 256.0},
		{"memory rounds up", func(s *compute.Settings) { s.Resources.MemoryLimitBytes = 1 }, "MemoryMaximumInMB", 1.0},
		{"storage iops", func(s *compute.Settings) { s.Resources.StorageIOPSMaximum = 11 }, "StorageIOPSMaximum", 11.0},
		{"storage bandwidth", func(s *compute.Settings) { s.Resources.StorageBandwidthMaximum = 12 }, "StorageBandwidthMaximum", 12.0},
		{"sandbox size", func(s *compute.Settings) { s.SandboxSizeBytes = 13 }, "StorageSandboxSize", 13.0},
		{"hostname", func(s *compute.Settings) { s.HostName = "h" }, "HostName", "h"},
		{"shared network", func(s *compute.Settings) { s.Network.SharedContainerName = "other" }, "NetworkSharedContainerName", "other"},
		{"dns search", func(s *compute.Settings) { s.Network.DNSSearchList = []string{"a", "b.c"} }, "DNSSearchList", "a,b.c"},
		{"unqualified dns", func(s *compute.Settings) { s.Network.AllowUnqualifiedDNSQuery = true }, "AllowUnqualifiedDNSQuery", true},
		{"credential spec", func(s *compute.Settings) { s.CredentialSpec = `{"a":1}` }, "Credentials", `{"a":1}`},
		{"devices", func(s *compute.Settings) {
			s.AssignedDevices = []compute.Device{{Kind: compute.DeviceClass, ID: "G1"}, {Kind: compute.DeviceClass, ID: "G2"}}
		}, "AssignedDevices", []any{map[string]any{"InterfaceClassGuid": "G1"}, map[string]any{"InterfaceClassGuid": "G2"}}},
		{"ignore flushes", func(s *compute.Settings) { s.IgnoreFlushesDuringBoot = true }, "IgnoreFlushesDuringBoot", true},
	}
	doc := func(s *compute.Settings) map[string]any {
		c := buildContainerConfig("id", s, []layerRef{{ID: "g", Path: `C:\base`}}, nil)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	base := doc(minimal())
	wantBase := map[string]any{
		"SystemType":      "Container",
		"Name":            "id",
		"Owner":           "winproc",
		"LayerFolderPath": `C:\s`,
		"Layers":          []any{map[string]any{"ID": "g", "Path": `C:\base`}},
		"HvPartition":     false,
	}
	if !reflect.DeepEqual(base, wantBase) {
		t.Fatalf("minimal document:\n got %v\nwant %v", base, wantBase)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := minimal()
			tc.change(s)
			got := doc(s)
			if !reflect.DeepEqual(got[tc.field], tc.want) {
				t.Errorf("%s = %#v, want %#v", tc.field, got[tc.field], tc.want)
			}
			for k, v := range got {
				if k != tc.field && !reflect.DeepEqual(v, base[k]) {
					t.Errorf("%s changed too: %#v", k, v)
				}
			}
			for k := range base {
				if _, ok := got[k]; !ok {
					t.Errorf("%s disappeared", k)
				}
			}
		})
	}
}

// The network namespace and endpoints arrive as EndpointList; the layers
// as given. Both pass through buildContainerConfig unchanged.
func TestContainerConfigLayersAndEndpoints(t *testing.T) {
	s := fullSettings()
	layers := []layerRef{{ID: "1", Path: "a"}, {ID: "2", Path: "b"}}
	c := buildContainerConfig("id", s, layers, []string{"e1", "e2"})
	if !reflect.DeepEqual(c.Layers, layers) {
		t.Errorf("Layers = %v", c.Layers)
	}
	layers[0].ID = "changed"
	if c.Layers[0].ID != "1" {
		t.Error("the document shares the caller's layer slice")
	}
	if !reflect.DeepEqual(c.EndpointList, []string{"e1", "e2"}) {
		t.Errorf("EndpointList = %v", c.EndpointList)
	}
	if c.HvPartition || c.SystemType != "Container" || c.Owner != Owner || c.Name != "id" {
		t.Errorf("fixed fields: %+v", c)
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
		{"no scratch", func(s *compute.Settings) { s.Layers.Scratch = "" }, 20348, errdefs.IsInvalidArgument},
		{"no parents", func(s *compute.Settings) { s.Layers.Parents = nil }, 20348, errdefs.IsInvalidArgument},
		{"empty parent", func(s *compute.Settings) { s.Layers.Parents = []string{`C:\a`, ""} }, 20348, errdefs.IsInvalidArgument},
		{"affinity", func(s *compute.Settings) {
			s.Resources.CPUAffinity = []compute.CPUGroupAffinity{{Mask: 1}}
		}, 20348, errdefs.IsNotImplemented},
		{"pipes before 1709", func(*compute.Settings) {}, 16298, errdefs.IsNotImplemented},
		{"pipes on 1709", func(s *compute.Settings) { s.AssignedDevices = nil }, 16299, nil},
		{"devices before 1809", func(s *compute.Settings) { s.MappedPipes = nil }, 17762, errdefs.IsNotImplemented},
		{"devices on 1809", func(*compute.Settings) {}, 17763, nil},
		{"nothing on an old host", func(s *compute.Settings) { s.MappedPipes, s.AssignedDevices = nil, nil }, 14393, nil},
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
	err := checkSettings(&compute.Settings{Layers: compute.Layers{Scratch: "s", Parents: []string{"p"}}, Resources: compute.Resources{CPUAffinity: []compute.CPUGroupAffinity{{Mask: 3}}}}, 20348)
	if !errors.Is(err, compute.ErrNotSupported) {
		t.Errorf("affinity is not ErrNotSupported: %v", err)
	}
}

func TestMemoryMB(t *testing.T) {
	for _, tc := range []struct {
		bytes uint64
		want  int64
	}{
		{0, 0}, {1, 1}, {1 << 20, 1}, {1<<20 + 1, 2}, {3 << 30, 3072}, {math.MaxUint64, 1 << 44},
	} {
		if got := memoryMB(compute.Resources{MemoryLimitBytes: tc.bytes}); got != tc.want {
			t.Errorf("memoryMB(%d) = %d, want %d", tc.bytes, got, tc.want)
		}
	}
}

func TestVolumePath(t *testing.T) {
	for in, want := range map[string]string{
		`\\?\Volume{a-b}\`: `\\?\Volume{a-b}`,
		`\\?\Volume{a-b}`:  `\\?\Volume{a-b}`,
		``:                 ``,
		`\`:                ``,
	} {
		if got := volumePath(in); got != want {
			t.Errorf("volumePath(%q) = %q, want %q", in, got, want)
		}
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

func TestMergeEndpoints(t *testing.T) {
	cases := []struct {
		explicit, ns, want []string
	}{
		{nil, nil, nil},
		{[]string{"a"}, nil, []string{"a"}},
		{nil, []string{"b", "c"}, []string{"b", "c"}},
		{[]string{"A", "b"}, []string{"a", "{B}", "c"}, []string{"A", "b", "c"}},
		{[]string{"a", "a", ""}, []string{""}, []string{"a"}},
	}
	for _, tc := range cases {
		if got := mergeEndpoints(tc.explicit, tc.ns); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("mergeEndpoints(%v, %v) = %v, want %v", tc.explicit, tc.ns, got, tc.want)
		}
	}
}

func TestProcessConfig(t *testing.T) {
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
		want   processConfig
	}{
		{"no streams", func(*compute.ProcessSettings) {}, processConfig{}},
		{"stdin", func(p *compute.ProcessSettings) { p.Stdin = r }, processConfig{CreateStdInPipe: true}},
		{"stdout", func(p *compute.ProcessSettings) { p.Stdout = &w }, processConfig{CreateStdOutPipe: true}},
		{"stderr", func(p *compute.ProcessSettings) { p.Stderr = &w }, processConfig{CreateStdErrPipe: true}},
		{"all", func(p *compute.ProcessSettings) { p.Stdin, p.Stdout, p.Stderr = r, &w, &w }, processConfig{CreateStdInPipe: true, CreateStdOutPipe: true, CreateStdErrPipe: true}},
		{"terminal drops stderr", func(p *compute.ProcessSettings) {
			p.Terminal = true
			p.Stdin, p.Stdout, p.Stderr = r, &w, &w
			p.ConsoleWidth, p.ConsoleHeight = 120, 30
		}, processConfig{EmulateConsole: true, CreateStdInPipe: true, CreateStdOutPipe: true, ConsoleSize: [2]uint{30, 120}}},
		{"terminal default size", func(p *compute.ProcessSettings) { p.Terminal = true }, processConfig{EmulateConsole: true}},
		{"size without terminal ignored", func(p *compute.ProcessSettings) { p.ConsoleWidth, p.ConsoleHeight = 80, 25 }, processConfig{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			tc.change(&p)
			got, err := buildProcessConfig(&p)
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
	if _, err := buildProcessConfig(&compute.ProcessSettings{}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("empty command line: %v", err)
	}
	if _, err := buildProcessConfig(nil); !errdefs.IsInvalidArgument(err) {
		t.Errorf("nil settings: %v", err)
	}
}

func TestProcessConfigJSON(t *testing.T) {
	c, err := buildProcessConfig(&compute.ProcessSettings{
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
