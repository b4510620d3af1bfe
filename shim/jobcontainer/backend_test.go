package jobcontainer

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/record"
)

func hostProcessSettings() *compute.Settings {
	return &compute.Settings{
		Layers: compute.Layers{
			Scratch: `C:\snapshots\9`,
			Parents: []string{`C:\snapshots\8`, `C:\snapshots\1`},
		},
		MappedDirectories: []compute.MappedDirectory{{HostPath: `C:\data`, ContainerPath: `C:\var\data`}},
		Resources:         compute.Resources{MemoryLimitBytes: 256 << 20, CPUMaximum: 5000},
		HostProcess:       &compute.HostProcess{},
	}
}

func (b *Backend) held(t *testing.T, id string) (held, bool) {
	t.Helper()
	var h held
	ok, err := b.records.Read(id, &h)
	if err != nil {
		t.Fatal(err)
	}
	return h, ok
}

func TestCreate(t *testing.T) {
	b, f := testBackend(t)
	s, err := b.Create(context.Background(), "c1", hostProcessSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []string{
		"createJobObject winproc-hostprocess-c1",
		"setJobLimits 0x2200 268435456",
		"setJobCPURate 0x5 5000",
		"createCompletionPort",
		"associateCompletionPort",
		`activate C:\snapshots\9`,
		`prepare C:\snapshots\9 C:\snapshots\8 C:\snapshots\1`,
		`mountPath C:\snapshots\9`,
		`mkdirAll C:\hpc\c1`,
		`setVolumeMountPoint C:\hpc\c1\ \\?\Volume{0b1e6a53-0000-0000-0000-000000000001}\`,
		`mkdirAll C:\hpc\c1\var`,
		`symlink C:\data C:\hpc\c1\var\data`,
	}
	var got []string
	for _, c := range f.callList() {
		if !strings.HasPrefix(c, "activeProcessors") && !strings.HasPrefix(c, "jobMessage") && !strings.HasPrefix(c, "jobAccounting") {
			got = append(got, c)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("calls\n%q\nwant\n%q", got, want)
	}
	if h, ok := b.held(t, "c1"); !ok || !reflect.DeepEqual(h, held{ID: "c1", Scratch: `C:\snapshots\9`, MountPoint: `C:\hpc\c1`, Shim: record.Self()}) {
		t.Errorf("record %+v, %v", h, ok)
	}
	if !f.isFile(`C:\hpc\c1\app.exe`) {
		t.Error("the image's files are not at the mount point")
	}
	if s.ID() != "c1" {
		t.Errorf("ID %q", s.ID())
	}
}

func TestCreateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     string
		change func(*compute.Settings)
		want   string
	}{
		{"not HostProcess", "c", func(s *compute.Settings) { s.HostProcess = nil }, "HCS backend"},
		{"no scratch", "c", func(s *compute.Settings) { s.Layers.Scratch = "" }, "scratch"},
		{"named pipe", "c", func(s *compute.Settings) { s.MappedPipes = []compute.MappedPipe{{HostPath: `\\.\pipe\p`}} }, `\\.\pipe\p`},
		{"network", "c", func(s *compute.Settings) { s.Network.Namespace = "NS" }, "network"},
		{"gMSA", "c", func(s *compute.Settings) { s.CredentialSpec = "{}" }, "gMSA"},
		{"devices", "c", func(s *compute.Settings) { s.AssignedDevices = []compute.Device{{Kind: compute.DeviceClass, ID: "x"}} }, "devices"},
		{"dumps", "c", func(s *compute.Settings) { s.ProcessDumps = &compute.ProcessDumps{} }, "dump"},
		{"storage limit", "c", func(s *compute.Settings) { s.Resources.StorageIOPSMaximum = 10 }, "storage"},
		{"whole drive", "c", func(s *compute.Settings) {
			s.MappedDirectories = []compute.MappedDirectory{{HostPath: `D:\`, ContainerPath: `D:`}}
		}, "whole drive"},
		{"out of the mount point", "c", func(s *compute.Settings) {
			s.MappedDirectories = []compute.MappedDirectory{{HostPath: `D:\x`, ContainerPath: `C:\data\..\..\Windows`}}
		}, "leads out"},
		{"out of the mount point, forward slashes", "c", func(s *compute.Settings) {
			s.MappedDirectories = []compute.MappedDirectory{{HostPath: `D:\x`, ContainerPath: `C:/data/../../Windows`}}
		}, "leads out"},
		{"bad id", `..\x`, func(*compute.Settings) {}, "ids are"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, f := testBackend(t)
			s := hostProcessSettings()
			tc.change(s)
			_, err := b.Create(context.Background(), tc.id, s)
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create = %v, want invalid naming %q", err, tc.want)
			}
			if calls := f.callNames(); len(calls) != 0 {
				t.Errorf("calls %q", calls)
			}
		})
	}
	b, _ := testBackend(t)
	if _, err := b.Create(context.Background(), "c", nil); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Create(nil) = %v", err)
	}
}

func TestCreateExisting(t *testing.T) {
	b, f := testBackend(t)
	s, err := b.Create(context.Background(), "c1", hostProcessSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := len(f.callList())
	if _, err := b.Create(context.Background(), "c1", hostProcessSettings()); !errdefs.IsAlreadyExists(err) {
		t.Fatalf("second Create = %v", err)
	}
	for _, c := range f.callList()[before:] {
		if strings.HasPrefix(c, "activate") || strings.HasPrefix(c, "setJob") {
			t.Errorf("an existing container's id touched %q", c)
		}
	}
}

// Every step that fails undoes the steps before it: no job, no mount, no
// layer, no record is left.
func TestCreateUndo(t *testing.T) {
	broken := errors.New("broken")
	for _, tc := range []struct {
		failing string
		err     error
		class   func(error) bool
	}{
		{"setJobLimits", broken, nil},
		{"setJobCPURate", errorInvalidParameter, errdefs.IsNotImplemented},
		{"createCompletionPort", broken, nil},
		{"associateCompletionPort", broken, nil},
		{"activate", errorAccessDenied, errdefs.IsPermissionDenied},
		{"prepare", broken, nil},
		{"mountPath", broken, nil},
		{"mkdirAll", broken, nil},
		{"setVolumeMountPoint", errorCallNotImplemented, errdefs.IsNotImplemented},
		{"symlink", errorPrivilegeNotHeld, errdefs.IsPermissionDenied},
	} {
		t.Run(tc.failing, func(t *testing.T) {
			b, f := testBackend(t)
			f.failNext(tc.failing, tc.err)
			_, err := b.Create(context.Background(), "c1", hostProcessSettings())
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "c1") {
				t.Fatalf("Create = %v, want it to wrap %v and name the container", err, tc.err)
			}
			if tc.class != nil && !tc.class(err) {
				t.Errorf("%v is not of the expected class", err)
			}
			if h := f.openHandles(); len(h) != 0 {
				t.Errorf("handles left open: %q", h)
			}
			if len(f.jobs) != 0 || len(f.mounts) != 0 {
				t.Errorf("jobs %v, mounts %v left", f.jobs, f.mounts)
			}
			activated := 0
			if tc.failing == "activate" {
				activated-- // the activation that failed
			}
			for _, c := range f.callNames() {
				switch c {
				case "activate":
					activated++
				case "deactivate":
					activated--
				}
			}
			if activated != 0 {
				t.Errorf("the scratch is left active: %q", f.callNames())
			}
			if _, ok := b.held(t, "c1"); ok {
				t.Error("a record was left")
			}
		})
	}
}

// A limit the host's job objects cannot take fails before the layers are
// touched, naming it.
func TestCreateLimitNotSupported(t *testing.T) {
	b, f := testBackend(t)
	f.failNext("setJobCPURate", errorInvalidParameter)
	_, err := b.Create(context.Background(), "c1", hostProcessSettings())
	if !errors.Is(err, compute.ErrNotSupported) || !strings.Contains(err.Error(), "CPU rate") || !strings.Contains(err.Error(), "remove the limit") {
		t.Fatalf("Create = %v", err)
	}
	for _, c := range f.callNames() {
		if c == "activate" {
			t.Error("the layers were touched")
		}
	}
}

func TestCreateSandboxSize(t *testing.T) {
	b, f := testBackend(t)
	s := hostProcessSettings()
	s.SandboxSizeBytes = 50 << 30
	sys, err := b.Create(context.Background(), "c1", s)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	names := f.callNames()
	for i, c := range names {
		if c == "expand" {
			if names[i+1] != "activate" {
				t.Errorf("expand not right before activation: %q", names)
			}
			return
		}
	}
	t.Errorf("no expand: %q", names)
}

// A record left by a container of the id whose shim died is released
// before the new container is mounted.
func TestCreateReleasesStaleRecord(t *testing.T) {
	b, f := testBackend(t)
	f.users["hpc-0123456789abcdef"] = "users"
	if err := b.records.Write("c1", held{ID: "c1", Scratch: `C:\old`, MountPoint: `C:\hpc\c1`, Users: []string{"hpc-0123456789abcdef"}}); err != nil {
		t.Fatal(err)
	}
	s, err := b.Create(context.Background(), "c1", hostProcessSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	calls := strings.Join(f.callList(), "\n")
	stale := strings.Index(calls, `unprepare C:\old`)
	if stale < 0 || stale > strings.Index(calls, `activate C:\snapshots\9`) || !strings.Contains(calls, "deleteUser hpc-0123456789abcdef") {
		t.Errorf("the stale record was not released first:\n%s", calls)
	}
	if h, _ := b.held(t, "c1"); h.Scratch != `C:\snapshots\9` || len(h.Users) != 0 {
		t.Errorf("record %+v", h)
	}
}

// Open of a container whose job is gone (its shim died, and the job with
// it) releases what the record names and says NotFound.
func TestOpenGone(t *testing.T) {
	b, f := testBackend(t)
	f.mounts[`c:\hpc\c1`] = f.volume
	f.files[`c:\hpc\c1`] = true
	f.users["hpc-00000000000000a1"] = "users"
	if err := b.records.Write("c1", held{ID: "c1", Scratch: `C:\snapshots\9`, MountPoint: `C:\hpc\c1`, Users: []string{"hpc-00000000000000a1"}}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Open(context.Background(), "c1")
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "winproc-hostprocess-c1") {
		t.Fatalf("Open = %v", err)
	}
	if len(f.mounts) != 0 || len(f.users) != 0 || f.isDir(`C:\hpc\c1`) {
		t.Errorf("mounts %v, users %v left", f.mounts, f.users)
	}
	if _, ok := b.held(t, "c1"); ok {
		t.Error("the record was left")
	}
	want := []string{"openJobObject", "deleteVolumeMountPoint", "remove", "unprepare", "deactivate", "deleteUser"}
	if got := f.callNames(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	// Nothing recorded: nothing to release.
	if _, err := b.Open(context.Background(), "c2"); !errdefs.IsNotFound(err) {
		t.Errorf("Open without a record = %v", err)
	}
}

// Open of a container whose job still exists (someone else holds a
// handle) gives a system the delete subcommand terminates; Close then
// releases what the record names.
func TestOpenRunning(t *testing.T) {
	b, f := testBackend(t)
	s, err := b.Create(context.Background(), "c1", hostProcessSettings())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe ignore", User: `NT AUTHORITY\SYSTEM`}); err != nil {
		t.Fatal(err)
	}
	o, err := b.Open(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	notWithin(t, o.Wait(), 30*time.Millisecond, "the opened system's stop")
	if err := o.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, o.Wait(), "the opened system's stop")
	if err := o.ExitError(); err != nil {
		t.Errorf("ExitError = %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if len(f.mounts) != 0 {
		t.Errorf("mounts %v left", f.mounts)
	}
	if _, ok := b.held(t, "c1"); ok {
		t.Error("the record was left")
	}
	within(t, s.Wait(), "the serving system's stop")
	s.Close()
}

func TestOpenBadID(t *testing.T) {
	b, _ := testBackend(t)
	if _, err := b.Open(context.Background(), "a/b"); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Open = %v", err)
	}
}

func TestHostCPUs(t *testing.T) {
	b, f := testBackend(t)
	if n := b.HostCPUs(); n != 8 {
		t.Errorf("HostCPUs = %d", n)
	}
	f.cpus = 0
	if n := b.HostCPUs(); n != runtime.NumCPU() {
		t.Errorf("HostCPUs after a failed count = %d", n)
	}
}

func TestNewOptions(t *testing.T) {
	b := newBackend(newFakeHost(t), Options{MountRoot: `D:\containers\`})
	if b.mountRoot != `D:\containers` || b.drain != DefaultDrainTimeout || b.records != "" {
		t.Errorf("backend %+v", b)
	}
	if b := newBackend(newFakeHost(t), Options{}); b.mountRoot != DefaultMountRoot {
		t.Errorf("mount root %q", b.mountRoot)
	}
}
