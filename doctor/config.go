package doctor

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/winproc/winproc/shim/options"
)

// Plugin names in containerd's config. Version 2 configs (containerd 1.7)
// keep the CRI settings in one plugin, which containerd 2.x migrates into
// the runtime and images plugins when it loads them.
const (
	pluginCRIv2     = "io.containerd.grpc.v1.cri"
	pluginCRIRun    = "io.containerd.cri.v1.runtime"
	pluginCRIImages = "io.containerd.cri.v1.images"
	pluginTransfer  = "io.containerd.transfer.v1.local"
	pluginDiff      = "io.containerd.service.v1.diff-service"
	pluginGRPC      = "io.containerd.server.v1.grpc"
)

// Config is containerd's config as far as winproc is concerned: the main
// file with its imports merged and older versions read the way containerd
// 2.x migrates them.
type Config struct {
	// Path is the main file, Version its version (1 when it has none).
	Path    string
	Version int
	// Files are the files read: Path, then its imports in load order.
	Files []string
	// GRPCAddress is containerd's socket or pipe as configured ("" for the
	// platform default).
	GRPCAddress string
	// State is containerd's state directory as configured ("" for the
	// platform default).
	State string
	// ProxyPlugins by name.
	ProxyPlugins map[string]ProxyPlugin
	// Runtimes are the CRI runtime handlers by name.
	Runtimes map[string]Runtime
	// DefaultRuntime is the CRI's default_runtime_name: the handler of
	// pods that name no RuntimeClass ("" for containerd's default).
	DefaultRuntime string
	// Snapshotter is the CRI image service's default snapshotter ("" for
	// containerd's platform default), SandboxImage its pinned sandbox
	// image ("" for containerd's default).
	Snapshotter  string
	SandboxImage string
	// RuntimePlatforms are the CRI image service's per-handler platform
	// and snapshotter (containerd 2.x).
	RuntimePlatforms map[string]RuntimePlatform
	// UnpackRules are the transfer service's unpack_config.
	UnpackRules []UnpackRule
	// MaxConcurrentUnpacks is the transfer service's
	// max_concurrent_unpacks (0 when not set: containerd's default, 1).
	MaxConcurrentUnpacks int
	// CRIPull are the CRI image settings that decide how CRI pulls.
	CRIPull CRIPull
	// DiffDefault is the diff service's differ order; nil if not set.
	DiffDefault []string
	// DisabledPlugins are the plugin URIs containerd does not load.
	DisabledPlugins []string
	// origin is the file that last set each plugin's table.
	origin map[string]string
}

// ProxyPlugin is a proxy_plugins entry.
type ProxyPlugin struct {
	Type, Address, Platform string
	// Root is exports.root: where the plugin keeps its data.
	Root string
	// Capabilities are what containerd is told the plugin can do.
	Capabilities []string
}

// CRIPull are the CRI image service's settings that make it pull with the
// client (use_local_image_pull, or a setting the transfer service does not
// take; containerd 2.x's CheckLocalImagePullConfigs) instead of through the
// transfer service. nil means not set.
type CRIPull struct {
	UseLocalImagePull          bool
	DisableSnapshotAnnotations *bool
	DiscardUnpackedLayers      bool
	MaxConcurrentDownloads     *int64
	ImagePullWithSyncFs        bool
	// LegacyRegistry names the deprecated registry tables set (mirrors,
	// configs, auths).
	LegacyRegistry []string
}

// Runtime is a CRI runtime handler's table.
type Runtime struct {
	RuntimeType string
	// RuntimePath is the shim binary containerd runs instead of the one
	// named after RuntimeType.
	RuntimePath string
	// Sandboxer is "shim" or "podsandbox" (sandbox_mode in version 2
	// configs); "" means containerd's default, podsandbox.
	Sandboxer   string
	Snapshotter string
	// PodAnnotations are the pod annotations containerd passes the shim.
	PodAnnotations []string
	// Options is the handler's options table, passed to the shim as is.
	Options map[string]any
}

// ShimOptions decodes the options as the shim does: unknown keys are an
// error, and an unset pause_image is options.DefaultPauseImage.
func (r Runtime) ShimOptions() (options.Options, error) {
	var body []byte
	if len(r.Options) > 0 {
		b, err := toml.Marshal(r.Options)
		if err != nil {
			return options.Options{}, err
		}
		body = b
	}
	return options.Decode(body)
}

// RuntimePlatform is a CRI image service runtime_platforms entry.
type RuntimePlatform struct {
	Platform, Snapshotter string
}

// UnpackRule is a transfer service unpack_config entry.
type UnpackRule struct {
	Platform, Snapshotter, Differ string
}

// RuntimeTable returns the TOML table name of handler's runtime in a file of
// this config's version, for messages.
func (c *Config) RuntimeTable(handler string) string {
	if c != nil && c.Version <= 2 {
		return fmt.Sprintf(`plugins.%q.containerd.runtimes.%s`, pluginCRIv2, tomlKey(handler))
	}
	return fmt.Sprintf(`plugins.'%s'.containerd.runtimes.%s`, pluginCRIRun, tomlKey(handler))
}

// Origin returns the file that set plugin's table ("" if none did).
func (c *Config) Origin(plugin string) string { return c.origin[plugin] }

func tomlKey(k string) string {
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Sprintf("%q", k)
		}
	}
	return k
}

// configFiles reads config files.
type configFiles interface {
	ReadFile(path string) ([]byte, error)
	Glob(pattern string) ([]string, error)
}

// rawFile is one config file as decoded.
type rawFile struct {
	path         string
	version      int
	grpcAddress  string
	state        string
	plugins      map[string]any
	proxyPlugins map[string]any
	imports      []string
	disabled     []string
}

// LoadConfig reads containerd's config at path and the files it imports
// (relative to the importing file, '*' globbing), as containerd does: each
// file is migrated on its own, then merged in load order, a later file's
// plugin and proxy plugin tables replacing an earlier file's whole.
func LoadConfig(files configFiles, path string) (*Config, error) {
	var raws []rawFile
	loaded := map[string]bool{}
	pending := []string{path}
	for len(pending) > 0 {
		p := pending[0]
		pending = pending[1:]
		if loaded[p] {
			continue
		}
		b, err := files.ReadFile(p)
		if err != nil {
			if len(raws) > 0 {
				return nil, fmt.Errorf("import %s: %w", p, err)
			}
			return nil, err
		}
		raw, err := parseConfigFile(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		raw.path = p
		raws = append(raws, raw)
		loaded[p] = true
		for _, imp := range raw.imports {
			imp = filepath.Clean(imp)
			if !filepath.IsAbs(imp) {
				imp = filepath.Join(filepath.Dir(p), imp)
			}
			if strings.Contains(imp, "*") {
				matches, err := files.Glob(imp)
				if err != nil {
					return nil, fmt.Errorf("%s: import %s: %w", p, imp, err)
				}
				pending = append(pending, matches...)
			} else {
				pending = append(pending, imp)
			}
		}
	}
	return mergeConfig(raws), nil
}

// parseConfigFile decodes one file and migrates its plugin tables to the
// names containerd 2.x uses.
func parseConfigFile(b []byte) (rawFile, error) {
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		return rawFile{}, fmt.Errorf("not valid TOML: %w", err)
	}
	f := rawFile{version: 1, plugins: asMap(doc["plugins"]), proxyPlugins: asMap(doc["proxy_plugins"])}
	if v, ok := doc["version"]; ok {
		n, ok := v.(int64)
		if !ok || n < 0 {
			return rawFile{}, fmt.Errorf("version = %v: not a config version", v)
		}
		if n > 0 {
			f.version = int(n)
		}
	}
	f.imports = asStrings(doc["imports"])
	f.disabled = asStrings(doc["disabled_plugins"])
	if f.plugins == nil {
		f.plugins = map[string]any{}
	}
	if f.version <= 1 {
		// Version 1 named plugins without their type: plugins.cri.
		for name, v := range f.plugins {
			if !strings.Contains(name, ".") {
				delete(f.plugins, name)
				f.plugins["io.containerd.grpc.v1."+name] = v
			}
		}
	}
	if f.version < 4 {
		migrateCRI(f.plugins)
		f.grpcAddress = asString(asMap(doc["grpc"])["address"])
	}
	if a := asString(asMap(f.plugins[pluginGRPC])["address"]); a != "" {
		f.grpcAddress = a
	}
	f.state = asString(doc["state"])
	return f, nil
}

// migrateCRI moves a version 2 CRI table's settings into the containerd 2.x
// runtime and images plugins, as their config migrations do: settings
// already there win, sandbox_mode becomes sandboxer, sandbox_image becomes
// pinned_images.sandbox, containerd.snapshotter the images plugin's
// snapshotter, and the pull settings (registry, max_concurrent_downloads,
// image_pull_with_sync_fs) the images plugin's.
func migrateCRI(plugins map[string]any) {
	src := asMap(plugins[pluginCRIv2])
	if src == nil {
		return
	}
	run := asMap(plugins[pluginCRIRun])
	if run == nil {
		run = map[string]any{}
	}
	images := asMap(plugins[pluginCRIImages])
	if images == nil {
		images = map[string]any{}
	}
	if img, ok := src["sandbox_image"]; ok {
		pinned := asMap(images["pinned_images"])
		if pinned == nil {
			pinned = map[string]any{}
		}
		pinned["sandbox"] = img
		images["pinned_images"] = pinned
	}
	// As containerd's images plugin migrates them (plugins/cri/images,
	// migrateConfig): the version 2 value wins.
	for _, k := range []string{"registry", "max_concurrent_downloads", "image_pull_with_sync_fs"} {
		if v, ok := src[k]; ok {
			images[k] = v
		}
	}
	if srcC := asMap(src["containerd"]); srcC != nil {
		dstC := asMap(run["containerd"])
		if dstC == nil {
			dstC = map[string]any{}
		}
		for k, v := range srcC {
			switch k {
			case "snapshotter", "disable_snapshot_annotations", "discard_unpacked_layers":
				images[k] = v
			default:
				if _, ok := dstC[k]; !ok {
					dstC[k] = v
				}
			}
		}
		for _, rt := range asMap(dstC["runtimes"]) {
			rm := asMap(rt)
			if mode, ok := rm["sandbox_mode"]; ok {
				if _, ok := rm["sandboxer"]; !ok {
					rm["sandboxer"] = mode
					delete(rm, "sandbox_mode")
				}
			}
		}
		run["containerd"] = dstC
	}
	plugins[pluginCRIRun] = run
	plugins[pluginCRIImages] = images
}

func mergeConfig(raws []rawFile) *Config {
	c := &Config{
		ProxyPlugins:     map[string]ProxyPlugin{},
		Runtimes:         map[string]Runtime{},
		RuntimePlatforms: map[string]RuntimePlatform{},
		origin:           map[string]string{},
	}
	plugins := map[string]any{}
	proxies := map[string]any{}
	for i, r := range raws {
		if i == 0 {
			c.Path, c.Version = r.path, r.version
		}
		c.Files = append(c.Files, r.path)
		for k, v := range r.plugins {
			plugins[k] = v
			c.origin[k] = r.path
		}
		for k, v := range r.proxyPlugins {
			proxies[k] = v
		}
		if r.grpcAddress != "" {
			c.GRPCAddress = r.grpcAddress
		}
		if r.state != "" {
			c.State = r.state
		}
		for _, d := range r.disabled {
			if !slices.Contains(c.DisabledPlugins, d) {
				c.DisabledPlugins = append(c.DisabledPlugins, d)
			}
		}
	}
	for name, v := range proxies {
		m := asMap(v)
		c.ProxyPlugins[name] = ProxyPlugin{Type: asString(m["type"]), Address: asString(m["address"]), Platform: asString(m["platform"]), Root: asString(asMap(m["exports"])["root"]), Capabilities: asStrings(m["capabilities"])}
	}
	criContainerd := asMap(asMap(plugins[pluginCRIRun])["containerd"])
	c.DefaultRuntime = asString(criContainerd["default_runtime_name"])
	for name, v := range asMap(criContainerd["runtimes"]) {
		m := asMap(v)
		c.Runtimes[name] = Runtime{
			RuntimeType:    asString(m["runtime_type"]),
			RuntimePath:    asString(m["runtime_path"]),
			Sandboxer:      asString(m["sandboxer"]),
			Snapshotter:    asString(m["snapshotter"]),
			PodAnnotations: asStrings(m["pod_annotations"]),
			Options:        asMap(m["options"]),
		}
	}
	images := asMap(plugins[pluginCRIImages])
	c.Snapshotter = asString(images["snapshotter"])
	c.SandboxImage = asString(asMap(images["pinned_images"])["sandbox"])
	for name, v := range asMap(images["runtime_platforms"]) {
		m := asMap(v)
		c.RuntimePlatforms[name] = RuntimePlatform{Platform: asString(m["platform"]), Snapshotter: asString(m["snapshotter"])}
	}
	c.CRIPull = criPull(images)
	if n, ok := asMap(plugins[pluginTransfer])["max_concurrent_unpacks"].(int64); ok {
		c.MaxConcurrentUnpacks = int(n)
	}
	if rules, ok := asMap(plugins[pluginTransfer])["unpack_config"].([]any); ok {
		for _, r := range rules {
			m := asMap(r)
			c.UnpackRules = append(c.UnpackRules, UnpackRule{Platform: asString(m["platform"]), Snapshotter: asString(m["snapshotter"]), Differ: asString(m["differ"])})
		}
	}
	if d, ok := asMap(plugins[pluginDiff])["default"]; ok {
		c.DiffDefault = asStrings(d)
		if c.DiffDefault == nil {
			c.DiffDefault = []string{}
		}
	}
	return c
}

func criPull(images map[string]any) CRIPull {
	p := CRIPull{
		UseLocalImagePull:     asBool(images["use_local_image_pull"]),
		DiscardUnpackedLayers: asBool(images["discard_unpacked_layers"]),
		ImagePullWithSyncFs:   asBool(images["image_pull_with_sync_fs"]),
	}
	if b, ok := images["disable_snapshot_annotations"].(bool); ok {
		p.DisableSnapshotAnnotations = &b
	}
	if n, ok := images["max_concurrent_downloads"].(int64); ok {
		p.MaxConcurrentDownloads = &n
	}
	registry := asMap(images["registry"])
	for _, k := range []string{"mirrors", "configs", "auths"} {
		if len(asMap(registry[k])) > 0 {
			p.LegacyRegistry = append(p.LegacyRegistry, k)
		}
	}
	return p
}

// runtimeNames lists the handlers, sorted.
func (c *Config) runtimeNames() []string {
	var names []string
	for n := range c.Runtimes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asBool(v any) bool {
	b, _ := v.(bool)
	return b
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

func asStrings(v any) []string {
	l, ok := v.([]any)
	if !ok {
		return nil
	}
	var out []string
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
