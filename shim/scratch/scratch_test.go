package scratch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// fakeLayers records the layer calls and fails them as queued.
type fakeLayers struct {
	calls  []string
	fail   map[string][]error
	volume string
}

func (f *fakeLayers) call(name string) error {
	f.calls = append(f.calls, name)
	if q := f.fail[name]; len(q) > 0 {
		f.fail[name] = q[1:]
		return q[0]
	}
	return nil
}

func (f *fakeLayers) Activate(string) error            { return f.call("activate") }
func (f *fakeLayers) Prepare(string, []string) error   { return f.call("prepare") }
func (f *fakeLayers) Unprepare(string) error           { return f.call("unprepare") }
func (f *fakeLayers) Deactivate(string) error          { return f.call("deactivate") }
func (f *fakeLayers) Expand(string, uint64) error      { return f.call("expand") }
func (f *fakeLayers) MountPath(string) (string, error) { return f.volume, f.call("mountPath") }

var errNotReady = syscall.Errno(21)

func mounter(f *fakeLayers) Mounter {
	return Mounter{
		Layers:     f,
		Fail:       func(what string, err error) error { return fmt.Errorf("%s: %w", what, err) },
		NotReady:   func(err error) bool { return errors.Is(err, errNotReady) },
		RetryDelay: time.Millisecond,
	}
}

func TestMount(t *testing.T) {
	broken := errors.New("broken")
	for _, tc := range []struct {
		name   string
		fail   map[string][]error
		volume string
		calls  []string
		check  func(error) bool
	}{
		{"mounted", nil, `\\?\Volume{1}\`, []string{"activate", "prepare", "mountPath"}, func(err error) bool { return err == nil }},
		{"activate fails", map[string][]error{"activate": {broken}}, `\\?\Volume{1}\`, []string{"activate"}, func(err error) bool { return errors.Is(err, broken) }},
		{"prepare fails: deactivated", map[string][]error{"prepare": {broken}}, `\\?\Volume{1}\`, []string{"activate", "prepare", "deactivate"}, func(err error) bool { return errors.Is(err, broken) }},
		{"no volume: released", nil, "", []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}, errdefs.IsFailedPrecondition},
		{"volume fails: released", map[string][]error{"mountPath": {broken}}, "", []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}, func(err error) bool { return errors.Is(err, broken) }},
		{"not ready, retried", map[string][]error{"activate": {errNotReady}, "prepare": {errNotReady}}, `\\?\Volume{1}\`,
			[]string{"activate", "activate", "prepare", "deactivate", "activate", "prepare", "mountPath"}, func(err error) bool { return err == nil }},
		{"not ready every time", map[string][]error{"activate": {errNotReady, errNotReady, errNotReady, errNotReady, errNotReady}}, `\\?\Volume{1}\`,
			[]string{"activate", "activate", "activate", "activate", "activate"}, func(err error) bool { return errors.Is(err, errNotReady) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLayers{fail: tc.fail, volume: tc.volume}
			v, err := mounter(f).Mount(context.Background(), `C:\s\1`, []string{`C:\s\0`})
			if !tc.check(err) {
				t.Fatalf("Mount = %q, %v", v, err)
			}
			if err == nil && v != tc.volume {
				t.Errorf("volume %q", v)
			}
			if err != nil && !strings.Contains(err.Error(), `C:\s\1`) {
				t.Errorf("%v does not name the scratch", err)
			}
			if !reflect.DeepEqual(f.calls, tc.calls) {
				t.Errorf("calls %q, want %q", f.calls, tc.calls)
			}
		})
	}
}

func TestMountCanceledWhileRetrying(t *testing.T) {
	f := &fakeLayers{fail: map[string][]error{"activate": {errNotReady}}}
	m := mounter(f)
	m.RetryDelay = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Mount(ctx, `C:\s\1`, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Mount = %v", err)
	}
}

func TestRelease(t *testing.T) {
	broken := errors.New("broken")
	for _, tc := range []struct {
		name        string
		fail        map[string][]error
		stillActive bool
	}{
		{"released", nil, false},
		{"unprepare fails, still deactivated", map[string][]error{"unprepare": {broken}}, false},
		{"deactivate fails", map[string][]error{"deactivate": {broken}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLayers{fail: tc.fail}
			err := mounter(f).Release(`C:\s\1`)
			if (err != nil) != (tc.fail != nil) || StillActive(err) != tc.stillActive {
				t.Errorf("Release = %v (still active %v)", err, StillActive(err))
			}
			if want := []string{"unprepare", "deactivate"}; !reflect.DeepEqual(f.calls, want) {
				t.Errorf("calls %q, want %q", f.calls, want)
			}
		})
	}
}
