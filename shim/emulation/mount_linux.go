//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/containerd/log"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// maxOverlayLayers is overlayfs's limit on lower layers (OVL_MAX_STACK).
const maxOverlayLayers = 500

// overlayOptions are the options of every overlay the backend mounts:
// index off, so a scratch can later be mounted over other lowers (and the
// committed layer holds no overlay index); redirect_dir and metacopy off, so
// the upper directory stays a plain layer diff (renamed directories are
// copied, not recorded as redirect xattrs) that the snapshotter can commit
// as a layer.
var overlayOptions = []string{"index=off", "redirect_dir=off", "metacopy=off"}

// escapeOverlayPath escapes a path for overlayfs's mount(2) option string,
// where ',' separates options and ':' lower directories; overlayfs takes a
// backslash as escaping the next character.
func escapeOverlayPath(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`)
	return r.Replace(p)
}

// overlayData is the mount(2) option string of an overlay.
func overlayData(lowers []string, upper, work string) string {
	esc := make([]string, len(lowers))
	for i, l := range lowers {
		esc[i] = escapeOverlayPath(l)
	}
	opts := append([]string{
		"lowerdir=" + strings.Join(esc, ":"),
		"upperdir=" + escapeOverlayPath(upper),
		"workdir=" + escapeOverlayPath(work),
	}, overlayOptions...)
	return strings.Join(opts, ",")
}

// mountOverlay mounts an overlay on target: lowers (topmost first) under
// upper, with overlayfs's work directory work.
//
// mount(2) takes the options as one string of at most a page (4096 bytes
// here), which a deep layer stack with long paths exceeds. Then the overlay
// is built with the new mount API instead (fsopen, one fsconfig "lowerdir+"
// per layer, fsmount, move_mount), which has no such limit; the kernel
// needs lowerdir+ for that, which it has from Linux 6.8 on. An older kernel
// fails with an error saying so.
func mountOverlay(target string, lowers []string, upper, work string) error {
	if len(lowers) == 0 {
		return errors.New("overlay: no lower directory")
	}
	if len(lowers) > maxOverlayLayers {
		return fmt.Errorf("overlay on %s: %d lower layers, more than overlayfs's limit of %d", target, len(lowers), maxOverlayLayers)
	}
	data := overlayData(lowers, upper, work)
	if len(data) < os.Getpagesize() {
		if err := unix.Mount("overlay", target, "overlay", 0, data); err != nil {
			return fmt.Errorf("mount overlay on %s (%s): %w", target, data, err)
		}
		return nil
	}
	if err := mountOverlayFsconfig(target, lowers, upper, work); err != nil {
		return fmt.Errorf("mount overlay on %s: its %d layers need %d bytes of mount options, more than mount(2) takes (%d, the page size), and the new mount API failed too (lowerdir+ needs Linux 6.8 or later): %w",
			target, len(lowers), len(data), os.Getpagesize()-1, err)
	}
	return nil
}

// mountOverlayFsconfig mounts an overlay through the new mount API.
func mountOverlayFsconfig(target string, lowers []string, upper, work string) (err error) {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fd)
	// The kernel explains a refusal in messages read from the context.
	explain := func(what string, err error) error {
		buf := make([]byte, 1024)
		var msgs []string
		for {
			n, rerr := unix.Read(fd, buf)
			if rerr != nil || n <= 0 {
				break
			}
			msgs = append(msgs, strings.TrimSpace(string(buf[:n])))
		}
		if len(msgs) > 0 {
			return fmt.Errorf("%s: %w (%s)", what, err, strings.Join(msgs, "; "))
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, l := range lowers {
		// lowerdir+ takes one path as it is: no escaping.
		if err := unix.FsconfigSetString(fd, "lowerdir+", l); err != nil {
			return explain("lowerdir+ "+l, err)
		}
	}
	if err := unix.FsconfigSetString(fd, "upperdir", upper); err != nil {
		return explain("upperdir "+upper, err)
	}
	if err := unix.FsconfigSetString(fd, "workdir", work); err != nil {
		return explain("workdir "+work, err)
	}
	for _, o := range overlayOptions {
		k, v, _ := strings.Cut(o, "=")
		if err := unix.FsconfigSetString(fd, k, v); err != nil {
			return explain(o, err)
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return explain("create", err)
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return explain("fsmount", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount to %s: %w", target, err)
	}
	return nil
}

// bindMount binds source onto target, read-only when ro.
func bindMount(source, target string, ro bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", source, target, err)
	}
	if !ro {
		return nil
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	err := unix.Mount("", target, "", flags, "")
	if errors.Is(err, unix.EPERM) {
		// In a user namespace the flags the source is mounted with
		// (nosuid, nodev, noexec) are locked and must be kept.
		var st unix.Statfs_t
		if unix.Statfs(target, &st) == nil {
			for _, f := range []int64{unix.ST_NOSUID, unix.ST_NODEV, unix.ST_NOEXEC, unix.ST_NOATIME, unix.ST_NODIRATIME, unix.ST_RELATIME} {
				if st.Flags&f != 0 {
					flags |= uintptr(mountFlag(f))
				}
			}
			err = unix.Mount("", target, "", flags, "")
		}
	}
	if err != nil {
		unmount(context.Background(), target)
		return fmt.Errorf("remount %s read-only: %w", target, err)
	}
	return nil
}

// mountFlag maps a statfs flag to its mount flag.
func mountFlag(st int64) int {
	switch st {
	case unix.ST_NOSUID:
		return unix.MS_NOSUID
	case unix.ST_NODEV:
		return unix.MS_NODEV
	case unix.ST_NOEXEC:
		return unix.MS_NOEXEC
	case unix.ST_NOATIME:
		return unix.MS_NOATIME
	case unix.ST_NODIRATIME:
		return unix.MS_NODIRATIME
	case unix.ST_RELATIME:
		return unix.MS_RELATIME
	}
	return 0
}

// mountsUnder lists the mount points at or below dir in the order to
// unmount them: deeper paths first (a mount below another was made on top
// of it), and among equal paths the most recent first (mountinfo lists
// mounts in the order they were made).
func mountsUnder(dir string) ([]string, error) {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	out := make([]string, len(infos))
	for i, m := range infos {
		out[len(infos)-1-i] = m.Mountpoint
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out, nil
}

// unmount unmounts target, retrying a busy mount for up to two seconds, or
// until ctx is done (a process that just died may still hold it for a
// moment), then detaching it lazily: it disappears from the namespace at
// once and is freed when its last user goes. A target that is not mounted
// is not an error.
func unmount(ctx context.Context, target string) error {
	deadline := time.Now().Add(2 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		err := unix.Unmount(target, 0)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY) && time.Now().Before(deadline):
			time.Sleep(50 * time.Millisecond)
			continue
		case errors.Is(err, unix.EBUSY):
			if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("unmount %s: %w", target, err)
			}
			log.L.WithField("mount", target).Warn("emulation: the mount stayed busy; detached it lazily (freed when its last user goes)")
			return nil
		default:
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
}

// unmountAll unmounts everything at or below dir.
func unmountAll(ctx context.Context, dir string) error {
	var errs []error
	// Twice: a first pass may leave a mount another covered, or one that
	// propagated back.
	for range 2 {
		mps, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return errors.Join(errs...)
		}
		errs = errs[:0]
		for _, mp := range mps {
			if err := unmount(ctx, mp); err != nil {
				errs = append(errs, err)
			}
		}
	}
	mps, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(mps) > 0 {
		errs = append(errs, fmt.Errorf("still mounted under %s: %s", dir, strings.Join(mps, ", ")))
	}
	return errors.Join(errs...)
}

// cleanPath makes dir absolute and resolves its symlinks as far as it
// exists, so that it compares with mountinfo's mount points.
func cleanPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	return abs, nil
}
