package winimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The pause image mirrors Kubernetes' Windows pause image
// (build/pause/Dockerfile_windows): pause.exe at C:\pause.exe as the
// entrypoint, wincat.exe (used for port forwarding) at
// C:\Windows\System32\wincat.exe, and a Windows PATH.
const (
	// PauseEntrypoint is the pause image's entrypoint.
	PauseEntrypoint = `C:\pause.exe`
	// PauseExePath and WincatExePath are where the pause layer puts
	// pause.exe and wincat.exe, relative to C:\ with '/' separators.
	PauseExePath  = "pause.exe"
	WincatExePath = "Windows/System32/wincat.exe"
	// PauseEnvPath is the pause image's PATH.
	PauseEnvPath = `PATH=C:\Windows\system32;C:\Windows;`
)

// PauseOptions configures PauseImage.
type PauseOptions struct {
	// PauseExe and WincatExe are the files to put at C:\pause.exe and
	// C:\Windows\System32\wincat.exe. Both are required.
	PauseExe, WincatExe string
	// Base is the image to build on, e.g. a nanoserver read with LoadBase;
	// nil builds on SyntheticBaseLayer.
	Base v1.Image
	// OSVersion is the os.version; required without Base, and with a Base
	// only the base's own is accepted ("" keeps it). See Config.
	OSVersion string
	// Architecture as in Config.
	Architecture string
	// Created is every time written (layers, config, history); zero means
	// DefaultCreated.
	Created time.Time
}

// PauseImage builds the pod infrastructure image: one layer holding
// pause.exe and wincat.exe (see the constants), on Base or on the synthetic
// base layer, with entrypoint PauseEntrypoint.
func PauseImage(ctx context.Context, o PauseOptions) (v1.Image, error) {
	if o.PauseExe == "" || o.WincatExe == "" {
		return nil, errors.New("pause image: both pause.exe and wincat.exe are required")
	}
	created := o.Created
	if created.IsZero() {
		created = DefaultCreated
	}
	if o.Base == nil && o.OSVersion == "" {
		return nil, errors.New("pause image: the Windows os.version is required without a base image, e.g. 10.0.20348.1")
	}
	tree, err := os.MkdirTemp("", "winimage-pause-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tree)
	for _, f := range []struct{ src, dst string }{
		{o.PauseExe, PauseExePath},
		{o.WincatExe, WincatExePath},
	} {
		if err := copyRegular(f.src, filepath.Join(tree, filepath.FromSlash(f.dst))); err != nil {
			return nil, fmt.Errorf("pause image: %w", err)
		}
	}
	layer, err := LayerFromTree(ctx, tree, WithCreated(created))
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	cfg := Config{
		OSVersion:    o.OSVersion,
		Architecture: o.Architecture,
		Entrypoint:   []string{PauseEntrypoint},
		Env:          []string{PauseEnvPath},
		Created:      created,
		CreatedBy:    "winproc image pause",
	}
	if o.Base != nil {
		return Append(o.Base, cfg, layer)
	}
	base, err := SyntheticBaseLayer(ctx, created)
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	return Build(cfg, base, layer)
}

// copyRegular copies the regular file src to dst, creating dst's parents.
func copyRegular(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(out, in)
	return err
}
