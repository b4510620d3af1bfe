package wincat

import "syscall"

// underWine reports whether the test runs under Wine, whose ntdll exports
// wine_get_version.
func underWine() bool {
	return syscall.NewLazyDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}
