package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/core/snapshots"

	"github.com/winproc/winproc/containerdconfig"
)

// ---- parallel unpack ----

// checkParallelUnpack checks what decides whether containerd extracts a
// pull's layers in parallel: an unpack limiter (the transfer service's
// max_concurrent_unpacks) and the rebase capability of the snapshotter
// (core/unpack/unpacker.go, supportParallel), for the pulls of the transfer
// service: ctr's, and CRI's unless it pulls with the client. Off Windows
// winproc-snapshotter takes a layer's parent at commit; on Windows hcsshim
// imports a layer with its parents, so the snapshotter refuses it and
// layers unpack one after another.
func (d *run) checkParallelUnpack(r *Result) []issue {
	c := d.cfg
	rebase := slices.Contains(c.ProxyPlugins[snapshotterName].Capabilities, snapshots.RebaseCap)
	transfer := fmt.Sprintf(`plugins.'%s'`, pluginTransfer)
	if c.Version <= 2 {
		transfer = fmt.Sprintf(`plugins.%q`, pluginTransfer)
	}
	if d.goos == "windows" {
		if rebase {
			return []issue{{Fail, fmt.Sprintf("[proxy_plugins.%s] lists the %q capability: containerd then unpacks layers without their parents, which winproc-snapshotter refuses on Windows (hcsshim imports a layer with its parents), so pulls fail", snapshotterName, snapshots.RebaseCap),
				[]string{fmt.Sprintf("remove %q from capabilities in [proxy_plugins.%s], then %s", snapshots.RebaseCap, snapshotterName, d.restartHint())}}}
		}
		addSummary(r, "one layer at a time (hcsshim imports a layer with its parents)")
		return nil
	}
	var missing, fix []string
	if !rebase {
		missing = append(missing, fmt.Sprintf("[proxy_plugins.%s] lacks the %q capability", snapshotterName, snapshots.RebaseCap))
		fix = append(fix, fmt.Sprintf("set capabilities = [%q] in [proxy_plugins.%s]", snapshots.RebaseCap, snapshotterName))
	}
	if c.MaxConcurrentUnpacks <= 1 {
		missing = append(missing, fmt.Sprintf("[%s] has max_concurrent_unpacks = %d", transfer, max(c.MaxConcurrentUnpacks, 1)))
		fix = append(fix, fmt.Sprintf("set max_concurrent_unpacks = %d in [%s]", containerdconfig.DefaultUnpackConcurrency, transfer))
	}
	if len(missing) > 0 {
		fix[len(fix)-1] += ", then " + d.restartHint()
		return []issue{{Warn, "containerd unpacks a pull's layers one after another: " + strings.Join(missing, " and "), fix}}
	}
	addSummary(r, fmt.Sprintf("up to %d layers at a time", c.MaxConcurrentUnpacks))
	if why := localPullReason(c.CRIPull, d.goos); why != "" {
		images := fmt.Sprintf(`plugins.'%s'`, pluginCRIImages)
		return []issue{{Warn, fmt.Sprintf("CRI pulls bypass the transfer service (%s) and unpack one layer at a time", why),
			[]string{fmt.Sprintf("remove it from [%s] (the transfer service's settings live in [%s]), then %s", images, transfer, d.restartHint())}}}
	}
	return nil
}

// localPullReason names the CRI setting that has containerd 2.x's CRI pull
// with the client instead of through the transfer service
// (internal/cri/config, CheckLocalImagePullConfigs), or "".
func localPullReason(p CRIPull, goos string) string {
	switch {
	case p.UseLocalImagePull:
		return "use_local_image_pull = true"
	case p.DisableSnapshotAnnotations != nil && *p.DisableSnapshotAnnotations == (goos == "windows"):
		return fmt.Sprintf("disable_snapshot_annotations = %t", *p.DisableSnapshotAnnotations)
	case p.DiscardUnpackedLayers:
		return "discard_unpacked_layers = true"
	case len(p.LegacyRegistry) > 0:
		return "registry." + strings.Join(p.LegacyRegistry, ", registry.")
	case p.MaxConcurrentDownloads != nil && *p.MaxConcurrentDownloads != 3:
		return fmt.Sprintf("max_concurrent_downloads = %d", *p.MaxConcurrentDownloads)
	case p.ImagePullWithSyncFs:
		return "image_pull_with_sync_fs = true"
	}
	return ""
}

// addSummary adds to a summary the rule check made: there is none when the
// unpack rule is wrong, which is the finding then.
func addSummary(r *Result, s string) {
	if r.Summary != "" {
		r.Summary += "; " + s
	}
}
