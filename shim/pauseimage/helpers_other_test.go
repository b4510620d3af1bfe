//go:build !linux

package pauseimage

import "errors"

var errNoWhiteouts = errors.New("no overlayfs whiteouts here")

func mknod(string) error     { return errNoWhiteouts }
func setOpaque(string) error { return errNoWhiteouts }
