package winimage

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/winproc/winproc/winbuild"
)

// DefaultArchitecture is the architecture of images built without one.
const DefaultArchitecture = "amd64"

// DefaultCreatedBy is the history created_by of layers added without
// Config.CreatedBy.
const DefaultCreatedBy = "winproc image"

// Config is the configuration of a built image. Paths are Windows paths,
// e.g. Entrypoint []string{`C:\pause.exe`}.
type Config struct {
	// OSVersion is the Windows build the image is for, e.g.
	// "10.0.20348.1" (a missing revision becomes ".0"): the os.version of
	// the config and of index descriptors. Build requires it; Append keeps
	// the base's and accepts only the same version here, or "".
	OSVersion string
	// Architecture is "amd64" or "arm64"; "" means DefaultArchitecture for
	// Build and the base's for Append.
	Architecture string

	// Entrypoint and Cmd replace the base's when not nil. As in a
	// Dockerfile, setting Entrypoint without Cmd clears the base's Cmd.
	Entrypoint []string
	Cmd        []string
	// Env holds NAME=value entries; Append replaces base entries of the same
	// name (compared case-insensitively, as Windows does) and adds the rest.
	Env []string
	// WorkingDir and User replace the base's when not empty.
	WorkingDir string
	User       string
	// Labels are added to the base's.
	Labels map[string]string

	// Created is the config's created time and the history time of the
	// added layers; zero means DefaultCreated. Layers have their own times
	// (see WithCreated).
	Created time.Time
	// CreatedBy is the history created_by of the added layers; "" means
	// DefaultCreatedBy.
	CreatedBy string
}

func (c *Config) created() time.Time {
	if c.Created.IsZero() {
		return DefaultCreated
	}
	return c.Created
}

// ParseOSVersion validates a Windows os.version and returns it with all
// four parts, e.g. "10.0.20348" -> "10.0.20348.0".
func ParseOSVersion(s string) (string, error) {
	v, err := winbuild.Parse(s)
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

func checkArch(arch string) (string, error) {
	switch arch {
	case "":
		return DefaultArchitecture, nil
	case "amd64", "arm64":
		return arch, nil
	}
	return "", fmt.Errorf("unsupported architecture %q: want amd64 or arm64", arch)
}

// Build returns an OCI image for windows/<Architecture> with os.version
// cfg.OSVersion whose layers are layers, bottom first (the first is usually
// SyntheticBaseLayer or another base layer).
func Build(cfg Config, layers ...v1.Layer) (v1.Image, error) {
	if len(layers) == 0 {
		return nil, errors.New("build: an image needs at least one layer")
	}
	if cfg.OSVersion == "" {
		return nil, errors.New("build: the Windows os.version is required, e.g. 10.0.20348.1")
	}
	osv, err := ParseOSVersion(cfg.OSVersion)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	arch, err := checkArch(cfg.Architecture)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	cf := &v1.ConfigFile{
		Architecture: arch,
		OS:           "windows",
		OSVersion:    osv,
		Created:      v1.Time{Time: cfg.created()},
		RootFS:       v1.RootFS{Type: "layers"},
	}
	applyConfig(&cf.Config, cfg)
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err = mutate.ConfigFile(base, cf)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	img, err := mutate.Append(base, addenda(cfg, types.OCILayer, layers)...)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	return img, nil
}

// Append returns base with layers added on top and cfg applied to its
// configuration (see Config for what replaces and what merges). The base
// must be a Windows image; its os.version and architecture are kept. If the
// base declares no os.version, cfg.OSVersion is required and recorded.
// Added layers get the Docker layer media type if base is a Docker-format
// image, else the OCI one.
func Append(base v1.Image, cfg Config, layers ...v1.Layer) (v1.Image, error) {
	bcf, err := base.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("append: base config: %w", err)
	}
	if !strings.EqualFold(bcf.OS, "windows") {
		return nil, fmt.Errorf("append: the base image is for os %q, not windows", bcf.OS)
	}
	osv := bcf.OSVersion
	switch {
	case osv == "" && cfg.OSVersion == "":
		return nil, errors.New("append: the base image declares no os.version; give the Windows os.version it is for")
	case cfg.OSVersion != "":
		want, err := winbuild.Parse(cfg.OSVersion)
		if err != nil {
			return nil, fmt.Errorf("append: %w", err)
		}
		if osv != "" {
			have, err := winbuild.Parse(osv)
			if err != nil {
				return nil, fmt.Errorf("append: base image: %w", err)
			}
			if have.Compare(want) != 0 {
				return nil, fmt.Errorf("append: the base image is for os.version %s, not %s (the os.version of an image is its base's)", osv, cfg.OSVersion)
			}
		} else {
			osv = want.String()
		}
	}
	if cfg.Architecture != "" && cfg.Architecture != bcf.Architecture {
		return nil, fmt.Errorf("append: the base image is for architecture %q, not %q", bcf.Architecture, cfg.Architecture)
	}

	layerType := types.OCILayer
	if mt, err := base.MediaType(); err == nil && mt == types.DockerManifestSchema2 {
		layerType = types.DockerLayer
	}
	img, err := mutate.Append(base, addenda(cfg, layerType, layers)...)
	if err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OSVersion = osv
	cf.Created = v1.Time{Time: cfg.created()}
	applyConfig(&cf.Config, cfg)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	return img, nil
}

func addenda(cfg Config, mediaType types.MediaType, layers []v1.Layer) []mutate.Addendum {
	by := cfg.CreatedBy
	if by == "" {
		by = DefaultCreatedBy
	}
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{
			Layer:     l,
			MediaType: mediaType,
			History:   v1.History{Created: v1.Time{Time: cfg.created()}, CreatedBy: by},
		}
	}
	return adds
}

// applyConfig applies the runtime settings of cfg to c (see Config).
func applyConfig(c *v1.Config, cfg Config) {
	if cfg.Entrypoint != nil {
		c.Entrypoint = slices.Clone(cfg.Entrypoint)
		c.Cmd = nil
	}
	if cfg.Cmd != nil {
		c.Cmd = slices.Clone(cfg.Cmd)
	}
	for _, e := range cfg.Env {
		c.Env = setEnv(c.Env, e)
	}
	if cfg.WorkingDir != "" {
		c.WorkingDir = cfg.WorkingDir
	}
	if cfg.User != "" {
		c.User = cfg.User
	}
	if len(cfg.Labels) > 0 {
		if c.Labels == nil {
			c.Labels = make(map[string]string, len(cfg.Labels))
		}
		maps.Copy(c.Labels, cfg.Labels)
	}
}

// setEnv replaces the entry of env with the same name as kv (Windows
// environment names are case-insensitive) or appends kv.
func setEnv(env []string, kv string) []string {
	name, _, _ := strings.Cut(kv, "=")
	env = slices.Clone(env)
	for i, e := range env {
		if n, _, _ := strings.Cut(e, "="); strings.EqualFold(n, name) {
			env[i] = kv
			return env
		}
	}
	return append(env, kv)
}

// NewIndex returns an OCI image index of images, in order. Each must be a
// Windows image declaring its os.version; its descriptor carries the
// image's platform including os.version, so that containerd and
// winbuild.BestManifest can pick the one for a host. Two images for the same
// platform and os.version are rejected.
func NewIndex(images ...v1.Image) (v1.ImageIndex, error) {
	if len(images) == 0 {
		return nil, errors.New("index: no images")
	}
	adds := make([]mutate.IndexAddendum, 0, len(images))
	seen := make(map[string]bool, len(images))
	for i, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("index: image %d: %w", i, err)
		}
		p := cf.Platform()
		if p == nil || !strings.EqualFold(p.OS, "windows") {
			return nil, fmt.Errorf("index: image %d is not a Windows image", i)
		}
		if p.OSVersion == "" {
			return nil, fmt.Errorf("index: image %d declares no os.version", i)
		}
		key := p.String()
		if seen[key] {
			return nil, fmt.Errorf("index: two images for %s", key)
		}
		seen[key] = true
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}
