package jobcontainer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hostprocess"
	"github.com/winproc/winproc/shim/record"
)

func bindSettings() *compute.Settings {
	s := hostProcessSettings()
	s.MappedDirectories = append(s.MappedDirectories, compute.MappedDirectory{HostPath: `C:\certs`, ContainerPath: `C:\etc\certs`, ReadOnly: true})
	return s
}

// With the bind filter, the rootfs is the scratch's volume bound at the
// mount point and each mapped directory a binding under it, read-only
// where the mount is; all are recorded before they are made, and Close
// removes them, the mapped directories first, then releases the scratch.
func TestCreateWithBindFilter(t *testing.T) {
	b, f := bindBackend(t)
	s, err := b.Create(context.Background(), "c1", bindSettings())
	if err != nil {
		t.Fatal(err)
	}
	volume := `\\?\Volume{0b1e6a53-0000-0000-0000-000000000001}\`
	want := []string{
		`activate C:\snapshots\9`,
		`prepare C:\snapshots\9 C:\snapshots\8 C:\snapshots\1`,
		`mountPath C:\snapshots\9`,
		`mkdirAll C:\hpc`,
		`bind C:\hpc\c1 ` + volume + ` false`,
		`mkdirAll C:\hpc\c1\var`,
		`bind C:\hpc\c1\var\data C:\data false`,
		`mkdirAll C:\hpc\c1\etc`,
		`bind C:\hpc\c1\etc\certs C:\certs true`,
	}
	if got := layerCalls(f); !reflect.DeepEqual(got, want) {
		t.Errorf("calls\n%q\nwant\n%q", got, want)
	}
	wantHeld := held{ID: "c1", Scratch: `C:\snapshots\9`, MountPoint: `C:\hpc\c1`, Bindings: []string{`C:\hpc\c1\var\data`, `C:\hpc\c1\etc\certs`}, Shim: record.Self()}
	if h, ok := b.held(t, "c1"); !ok || !reflect.DeepEqual(h, wantHeld) {
		t.Errorf("record %+v, %v; want %+v", h, ok, wantHeld)
	}
	if !f.isFile(`C:\hpc\c1\app.exe`) {
		t.Error("the image's files are not at the mount point")
	}

	stopped(t, s)
	mark := len(f.callList())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want = []string{
		`unbind C:\hpc\c1\etc\certs`,
		`unbind C:\hpc\c1\var\data`,
		`unbind C:\hpc\c1`,
		`unprepare C:\snapshots\9`,
		`deactivate C:\snapshots\9`,
	}
	if got := layerCalls(f)[len(layerCallsUpTo(f, mark)):]; !reflect.DeepEqual(got, want) {
		t.Errorf("Close's calls\n%q\nwant\n%q", got, want)
	}
	if len(f.binds) != 0 || f.isDir(`C:\hpc\c1`) {
		t.Errorf("bindings %v or the mount point left", f.binds)
	}
	if _, ok := b.held(t, "c1"); ok {
		t.Error("the record was left")
	}
}

// A failed binding undoes what Create did, the bindings it never made
// included (the filter answers ERROR_INVALID_PARAMETER for those); the
// error keeps its class.
func TestCreateBindFails(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int // the binding that fails: 1 the rootfs, 2 and 3 mapped directories
		err   error
		class func(error) bool
	}{
		{"rootfs", 1, errorAccessDenied, errdefs.IsPermissionDenied},
		{"first mapped directory", 2, errorPathNotFound, errdefs.IsNotFound},
		{"read-only mapped directory", 3, errorAlreadyExists, errdefs.IsAlreadyExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, f := bindBackend(t)
			errs := make([]error, tc.fails)
			errs[tc.fails-1] = tc.err
			f.failNext("bind", errs...)
			_, err := b.Create(context.Background(), "c1", bindSettings())
			if !errors.Is(err, tc.err) || !tc.class(err) || !strings.Contains(err.Error(), "c1") {
				t.Fatalf("Create = %v, want %v of its class, naming the container", err, tc.err)
			}
			if len(f.binds) != 0 || len(f.jobs) != 0 || len(f.openHandles()) != 0 {
				t.Errorf("bindings %v, jobs %v, handles %q left", f.binds, f.jobs, f.openHandles())
			}
			calls := strings.Join(f.callList(), "\n")
			if strings.Count(calls, "activate ")-strings.Count(calls, "deactivate ") != strings.Count(calls, "deactivate ") {
				t.Errorf("the scratch was not released:\n%s", calls)
			}
			if _, ok := b.held(t, "c1"); ok {
				t.Error("a record was left")
			}
		})
	}
}

// A binding that cannot be removed keeps the record, and the rootfs under
// it, until a later release succeeds: the delete subcommand after the
// shim died (Open) releases what is left.
func TestUnbindFailsThenOpenReleases(t *testing.T) {
	b, f := bindBackend(t)
	s, err := b.Create(context.Background(), "c1", bindSettings())
	if err != nil {
		t.Fatal(err)
	}
	stopped(t, s)
	f.failNext("unbind", nil, errorAccessDenied)
	if err := s.Close(); !errors.Is(err, errorAccessDenied) || !strings.Contains(err.Error(), `C:\hpc\c1\var\data`) {
		t.Fatalf("Close = %v, want the failed unbinding named", err)
	}
	h, ok := b.held(t, "c1")
	if !ok || h.Scratch == "" || !reflect.DeepEqual(h.Bindings, []string{`C:\hpc\c1\var\data`}) {
		t.Fatalf("record %+v, %v: want the scratch and the binding left", h, ok)
	}
	if _, ok := f.binds[`c:\hpc\c1`]; !ok {
		t.Error("the rootfs was unbound while a binding under it stayed")
	}
	if _, err := b.Open(context.Background(), "c1"); !errdefs.IsNotFound(err) {
		t.Fatalf("Open = %v", err)
	}
	if len(f.binds) != 0 {
		t.Errorf("bindings left: %v", f.binds)
	}
	if _, ok := b.held(t, "c1"); ok {
		t.Error("the record was left")
	}
}

// After a reboot (bindings do not survive one) a record names bindings
// the filter no longer has, and removing one answers
// ERROR_INVALID_PARAMETER (microsoft/go-winio#274): the record, the
// scratch and the rest are still released by the shim's delete (Open),
// by the next Create of the id and by doctor -fix (RemoveOrphan).
func TestReleaseAfterReboot(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		release func(*Backend) error
	}{
		{"delete", func(b *Backend) error {
			if _, err := b.Open(ctx, "c1"); !errdefs.IsNotFound(err) {
				return fmt.Errorf("Open = %v, want NotFound", err)
			}
			return nil
		}},
		{"next create", func(b *Backend) error {
			s, err := b.Create(ctx, "c1", bindSettings())
			if err != nil {
				return err
			}
			stopped(t, s)
			return s.Close()
		}},
		{"doctor -fix", func(b *Backend) error {
			orphans, err := b.FindOrphans(ctx, nil)
			if err != nil || len(orphans) != 1 {
				return fmt.Errorf("FindOrphans = %+v, %v", orphans, err)
			}
			return b.RemoveOrphan(ctx, orphans[0])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, f := bindBackend(t)
			left := held{ID: "c1", Scratch: `C:\snapshots\old`, MountPoint: `C:\hpc\c1`, Bindings: []string{`C:\hpc\c1\var\data`}, Shim: record.Shim{PID: 1 << 30, Start: 1}}
			if err := b.records.Write("c1", left); err != nil {
				t.Fatal(err)
			}
			if err := tc.release(b); err != nil {
				t.Fatal(err)
			}
			if _, ok := b.held(t, "c1"); ok {
				t.Error("the record was left")
			}
			calls := strings.Join(f.callList(), "\n")
			for _, want := range []string{`unbind C:\hpc\c1\var\data`, `unbind C:\hpc\c1`, `deactivate C:\snapshots\old`} {
				if !strings.Contains(calls, want) {
					t.Errorf("no %q: the scratch was not released:\n%s", want, calls)
				}
			}
			if len(f.binds) != 0 {
				t.Errorf("bindings left: %v", f.binds)
			}
		})
	}
}

// stopped starts s and terminates it, so that Close releases what it
// holds.
func stopped(t *testing.T, s compute.System) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Terminate(context.Background()); err != nil && !errdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	within(t, s.Wait(), "the stop after Terminate")
}

// layerCalls are the calls that touch layers, directories and bindings.
func layerCalls(f *fakeHost) []string { return layerCallsUpTo(f, len(f.callList())) }

func layerCallsUpTo(f *fakeHost, n int) []string {
	var got []string
	for _, c := range f.callList()[:n] {
		name, _, _ := strings.Cut(c, " ")
		switch name {
		case "activate", "prepare", "mountPath", "mkdirAll", "bind", "unbind", "unprepare", "deactivate":
			got = append(got, c)
		}
	}
	return got
}

// bindBackend is testBackend on a host with the bind filter.
func bindBackend(t *testing.T) (*Backend, *fakeHost) {
	t.Helper()
	f := newFakeHost(t)
	f.binds = make(map[string]string)
	return testBackendOn(t, f)
}

// The bind filter of the fake host: binds holds root → source.

func (f *fakeHost) bindFilter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.binds != nil
}

// bind is BfSetupFilter with BINDFLT_FLAG_NO_MULTIPLE_TARGETS: a root
// bound already is ERROR_INVALID_PARAMETER (go-winio pkg/bindfilter); a
// volume's files show under its root.
func (f *fakeHost) bind(root, source string, readOnly bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("bind", root, source, strconv.FormatBool(readOnly)); err != nil {
		return err
	}
	key := strings.ToLower(root)
	if _, ok := f.binds[key]; ok {
		return errorInvalidParameter
	}
	f.binds[key] = source
	f.addPathLocked(root, true)
	if source == f.volume {
		for _, p := range f.image {
			f.addPathLocked(hostprocess.Join(root, p), false)
		}
	}
	return nil
}

// unbind is BfRemoveMapping: a root without a binding is
// ERROR_INVALID_PARAMETER (microsoft/go-winio#274).
func (f *fakeHost) unbind(root string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("unbind", root); err != nil {
		return err
	}
	key := strings.ToLower(root)
	if _, ok := f.binds[key]; !ok {
		return errorInvalidParameter
	}
	delete(f.binds, key)
	for p := range f.files {
		if p == key || strings.HasPrefix(p, key+`\`) {
			delete(f.files, p)
		}
	}
	return nil
}

// The kubelet mounts every container's termination log, a file named
// through its volume's GUID: the adapter is handed the source unchanged,
// and filterSource keeps it unchanged (a separator after it would make
// the bind filter look the file up as a directory), adding one only to a
// volume named alone, as go-winio binds a volume.
func TestFileSourceBound(t *testing.T) {
	const logFile = `\\?\Volume{6a3c1f60-1d2b-4a57-9c11-0f9e5b2d7a41}\var\lib\kubelet\pods\p1\containers\c\0`
	b, f := bindBackend(t)
	s := bindSettings()
	s.MappedDirectories = append(s.MappedDirectories, compute.MappedDirectory{HostPath: logFile, ContainerPath: `C:\dev\termination-log`})
	sys, err := b.Create(context.Background(), "c1", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped(t, sys); sys.Close() })
	if want := `bind C:\hpc\c1\dev\termination-log ` + logFile + ` false`; !strings.Contains(strings.Join(f.callList(), "\n"), want) {
		t.Errorf("calls %q: want %q", f.callList(), want)
	}
	for _, tc := range []struct{ source, want string }{
		{logFile, logFile},
		{`\\?\Volume{6a3c1f60-1d2b-4a57-9c11-0f9e5b2d7a41}`, `\\?\Volume{6a3c1f60-1d2b-4a57-9c11-0f9e5b2d7a41}\`},
		{`\\?\Volume{6a3c1f60-1d2b-4a57-9c11-0f9e5b2d7a41}\`, `\\?\Volume{6a3c1f60-1d2b-4a57-9c11-0f9e5b2d7a41}\`},
		{`\\?\Volume{6a3c1f60-1d2b-4a57-9c11-0f9e5b2d7a41}\data`, `\\?\Volume{6a3c1f60-1d2b-4a57-9c11-0f9e5b2d7a41}\data`},
		{`C:\var\log\app.log`, `C:\var\log\app.log`},
		{`C:\data`, `C:\data`},
	} {
		if got := filterSource(tc.source); got != tc.want {
			t.Errorf("filterSource(%s) = %s, want %s", tc.source, got, tc.want)
		}
	}
}
