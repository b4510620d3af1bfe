package winbuild

// ImageOSVersion is the Windows build an image was made for, the one rule
// every build check of winproc judges by (the differ's at unpack,
// winimage/resolve's for the shim and `winproc doctor`, winimage's choice
// of a base): its config's os.version, the image's own record of its base
// layers; when the config has none, entryOSVersion, the os.version of the
// index entry the image's manifest was chosen by (or is listed by), the
// build it was published for. "" when neither says: Check then answers
// ErrUnknownBuild.
func ImageOSVersion(configOSVersion, entryOSVersion string) string {
	if configOSVersion != "" {
		return configOSVersion
	}
	return entryOSVersion
}
