#!/usr/bin/env bash
# Sets up what running Windows programs under Wine needs here: Wine 8, the
# MinGW cross compiler and gcc (from Debian), the ProcessPrng stub DLL, and
# one template Wine prefix with the stub in windows/system32 and the exit
# library (wineexit.c) in winproc/. Idempotent:
# each step is skipped when its result is already in place.
#
# usage: setup.sh PREFIX_DIR
set -euo pipefail

prefix=${1:?usage: setup.sh PREFIX_DIR}
here=$(cd "$(dirname "$0")" && pwd)

need=()
command -v wine >/dev/null || need+=(wine wine64)
command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64-win32)
{ command -v gcc >/dev/null && [ -e /usr/include/dlfcn.h ]; } || need+=(gcc libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
	echo "wine setup: installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

export WINEPREFIX=$prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="

dll=$prefix.dll/bcryptprimitives.dll
if [ ! -f "$dll" ] || [ "$here/bcryptprimitives.c" -nt "$dll" ] || [ "$here/bcryptprimitives.def" -nt "$dll" ]; then
	mkdir -p "$(dirname "$dll")"
	x86_64-w64-mingw32-gcc -O2 -shared -s -o "$dll" \
		"$here/bcryptprimitives.c" "$here/bcryptprimitives.def" -ladvapi32
fi

if [ ! -f "$prefix/system.reg" ]; then
	echo "wine setup: creating template prefix $prefix"
	rm -rf "$prefix"
	mkdir -p "$(dirname "$prefix")"
	setarch -R wineboot -i >/dev/null 2>&1
	wineserver -w
fi

sys32=$prefix/drive_c/windows/system32
cmp -s "$dll" "$sys32/bcryptprimitives.dll" || cp "$dll" "$sys32/bcryptprimitives.dll"

# winproc/wineexit.so is internal/winetemplate.ExitLibrary.
lib=$prefix/winproc/wineexit.so
if [ ! -f "$lib" ] || [ "$here/wineexit.c" -nt "$lib" ]; then
	mkdir -p "$(dirname "$lib")"
	gcc -O2 -Wall -Werror -shared -fPIC -o "$lib.tmp" "$here/wineexit.c" -ldl -lpthread
	mv "$lib.tmp" "$lib"
fi
