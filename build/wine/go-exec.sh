#!/usr/bin/env bash
# go test -exec wrapper: runs a Windows test binary under Wine in the template
# prefix (WINPROC_WINE_PREFIX), then waits for that prefix's wineserver to exit
# so no process outlives the test run.
set -u
: "${WINPROC_WINE_PREFIX:?set WINPROC_WINE_PREFIX to the template prefix (make wine)}"
export WINEPREFIX=$WINPROC_WINE_PREFIX WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
# setarch -R: see shim/emulation/doc.go (a randomized heap can take the
# fixed address of Wine's shared user data, and the process exits 1).
# The exit library keeps a Go program's exit from hanging now and then
# (build/wine/wineexit.c).
lib=$WINPROC_WINE_PREFIX/winproc/wineexit.so
[ -f "$lib" ] || { echo "go-exec.sh: $lib is missing: run make wine" >&2; exit 2; }
LD_PRELOAD=$lib setarch -R wine "$@"
status=$?
wineserver -w
exit $status
