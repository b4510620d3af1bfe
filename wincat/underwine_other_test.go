//go:build !windows

package wincat

func underWine() bool { return false }
