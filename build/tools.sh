#!/usr/bin/env bash
# Builds the pinned third-party tools the integration tests drive, from the Go
# module proxy, into DIR: containerd and ctr (and containerd's own runc shim,
# the yardstick for shim memory), crictl, and containerd.exe, ctr.exe and
# crictl.exe in DIR/bin/windows for the Windows node under Wine
# (integration/winenode). A
# tool already built at the pinned version is kept.
#
# DIR/bin/cni holds the CNI plugins the emulated node gives pods their
# networks with: bridge, host-local and loopback from containernetworking/plugins.
#
# critest.exe is cri-tools' CRI conformance suite at crictl's version, built
# for Windows as containerd's Windows CI builds it, for `make conformance`
# (integration/winenode, docs/conformance.md).
#
# containerd-wincri is that containerd with build/containerd-wincri.patch, a
# tool of the emulated node that never ships: its CRI, built for Linux, then
# makes Windows container specs as the Windows build does
# (docs/test-node.md).
#
# kubelet.exe in DIR/bin/windows is the stock kubelet built for Windows with
# build/kubelet-wine.patch, which only works around what Wine lacks; the
# Windows node's kubelet tier runs it standalone against containerd.exe
# (docs/test-node.md).
#
# usage: tools.sh DIR
set -euo pipefail

dir=${1:?usage: tools.sh DIR}
containerd_version=v2.4.2
crictl_version=v1.36.0
kubernetes_version=v1.37.2
# The version containerd v2.4.2 itself requires.
cni_plugins_version=v1.9.1
mkdir -p "$dir/bin"
dir=$(cd "$dir" && pwd)
export GOFLAGS=-mod=mod CGO_ENABLED=0

# A tool's stamp is .NAME.version beside it.
stampfile() { echo "$dir/bin/$(dirname "$1")/.$(basename "$1").version"; }
stamp() { [ -x "$dir/bin/$1" ] && [ "$(cat "$(stampfile "$1")" 2>/dev/null)" = "$2" ]; }
mark() { echo "$2" >"$(stampfile "$1")"; }

if ! stamp containerd $containerd_version || ! stamp ctr $containerd_version || ! stamp containerd-shim-runc-v2 $containerd_version; then
	echo "tools: building containerd $containerd_version"
	GOBIN=$dir/bin go install \
		github.com/containerd/containerd/v2/cmd/containerd@$containerd_version \
		github.com/containerd/containerd/v2/cmd/ctr@$containerd_version \
		github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version
	for b in containerd ctr containerd-shim-runc-v2; do mark $b $containerd_version; done
fi

if ! stamp cni/bridge $cni_plugins_version || ! stamp cni/host-local $cni_plugins_version || ! stamp cni/loopback $cni_plugins_version; then
	echo "tools: building CNI plugins $cni_plugins_version"
	mkdir -p "$dir/bin/cni"
	GOBIN=$dir/bin/cni go install \
		github.com/containernetworking/plugins/plugins/main/bridge@$cni_plugins_version \
		github.com/containernetworking/plugins/plugins/ipam/host-local@$cni_plugins_version \
		github.com/containernetworking/plugins/plugins/main/loopback@$cni_plugins_version
	for b in bridge host-local loopback; do mark cni/$b $cni_plugins_version; done
fi

containerd_module() {
	GOFLAGS= go mod download -json github.com/containerd/containerd/v2@$containerd_version |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# Wine 8 answers NtSetInformationFile(FileDispositionInformationEx) with
# STATUS_NOT_IMPLEMENTED, which the Go runtime's fallback to
# FileDispositionInformation does not take, so os.RemoveAll fails under Wine
# ("Invalid function") and containerd.exe cannot remove a container's state.
# The Windows node's containerd.exe is built with the fallback taken for that
# status too (an -overlay of one file of the Go runtime); on Windows the
# status never comes.
windows_overlay() {
	local src out
	src=$(go env GOROOT)/src/internal/syscall/windows/at_windows.go
	out=$1/at_windows.go
	sed 's|STATUS_NOT_SUPPORTED:     // the file system|STATUS_NOT_SUPPORTED, NTStatus(0xC0000002): // or Wine 8; the file system|' "$src" >"$out"
	if cmp -s "$src" "$out"; then
		echo "tools: $src has changed; update windows_overlay in $0" >&2
		return 1
	fi
	printf '{"Replace":{"%s":"%s"}}' "$src" "$out" >"$1/overlay.json"
}
containerd_windows_version="$containerd_version+$(go env GOVERSION)+wine-removeall"
if ! stamp windows/containerd.exe "$containerd_windows_version" || ! stamp windows/ctr.exe "$containerd_windows_version"; then
	echo "tools: building containerd $containerd_version for Windows"
	# `go install` does not cross-compile into GOBIN: build in the module,
	# whose go.sum is complete.
	mod=$(containerd_module)
	mkdir -p "$dir/bin/windows"
	ovl=$(mktemp -d)
	windows_overlay "$ovl"
	(cd "$mod" && GOOS=windows GOARCH=amd64 go build -trimpath -overlay "$ovl/overlay.json" -o "$dir/bin/windows/" ./cmd/containerd ./cmd/ctr)
	rm -rf "$ovl"
	for b in containerd.exe ctr.exe; do mark windows/$b "$containerd_windows_version"; done
fi

patch=$(cd "$(dirname "$0")" && pwd)/containerd-wincri.patch
wincri_version="$containerd_version+$(sha256sum "$patch" | cut -c1-12)"
if ! stamp containerd-wincri "$wincri_version"; then
	echo "tools: building containerd $containerd_version with $(basename "$patch")"
	src=$(mktemp -d)
	cp -r "$(containerd_module)/." "$src"
	chmod -R u+w "$src"
	(cd "$src" && git apply "$patch" && go build -trimpath -o "$dir/bin/containerd-wincri" ./cmd/containerd)
	rm -rf "$src"
	mark containerd-wincri "$wincri_version"
fi

if ! stamp crictl $crictl_version || ! stamp windows/crictl.exe $crictl_version; then
	echo "tools: building crictl $crictl_version, and crictl.exe for the Windows node"
	# cri-tools cannot be installed with `go install` (the checksum database and
	# version list refuse it): fetch the module, build from a writable copy.
	mod=$(GONOSUMDB=sigs.k8s.io/cri-tools GOFLAGS= go mod download -json sigs.k8s.io/cri-tools@$crictl_version |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	src=$(mktemp -d)
	trap 'chmod -R u+w "$src"; rm -rf "$src"' EXIT
	cp -r "$mod/." "$src"
	chmod -R u+w "$src"
	# The module zip holds only vendor/modules.txt, not the vendored code.
	rm -rf "$src/vendor"
	ldflags="-X sigs.k8s.io/cri-tools/pkg/version.Version=${crictl_version#v}"
	(cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$dir/bin/crictl" ./cmd/crictl)
	mkdir -p "$dir/bin/windows"
	(cd "$src" && GOOS=windows GOARCH=amd64 go build -trimpath -ldflags "$ldflags" -o "$dir/bin/windows/crictl.exe" ./cmd/crictl)
	mark crictl $crictl_version
	mark windows/crictl.exe $crictl_version
fi

# The kubelet: k8s.io/kubernetes from the module proxy, its staging modules
# (replaced by ./staging/src in its go.mod, which the module zip leaves out)
# replaced by their published v0.${kubernetes_version#v1.} instead (its go.work,
# which names ./staging, off), with
# build/kubelet-wine.patch and the same os.RemoveAll overlay as containerd.exe.
kpatch=$(cd "$(dirname "$0")" && pwd)/kubelet-wine.patch
kubelet_version="$kubernetes_version+$(go env GOVERSION)+$(sha256sum "$kpatch" | cut -c1-12)"
if ! stamp windows/kubelet.exe "$kubelet_version"; then
	echo "tools: building kubelet $kubernetes_version for Windows with $(basename "$kpatch")"
	mod=$(GOFLAGS= go mod download -json k8s.io/kubernetes@$kubernetes_version |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	ksrc=$(mktemp -d)
	cp -r "$mod/." "$ksrc"
	chmod -R u+w "$ksrc"
	staging=v0.${kubernetes_version#v1.}
	sed -i "s|^\t\(k8s.io/[a-z-]*\) => ./staging/src/k8s.io/[a-z-]*\$|\t\1 => \1 $staging|" "$ksrc/go.mod"
	if grep -q '=> ./staging' "$ksrc/go.mod"; then
		echo "tools: a staging replace of k8s.io/kubernetes $kubernetes_version was left; update $0" >&2
		exit 1
	fi
	ovl=$(mktemp -d)
	windows_overlay "$ovl"
	minor=${kubernetes_version#v1.}
	minor=${minor%%.*}
	ldflags="-X k8s.io/component-base/version.gitVersion=$kubernetes_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
	mkdir -p "$dir/bin/windows"
	(cd "$ksrc" && git apply "$kpatch" &&
		GOWORK=off GOOS=windows GOARCH=amd64 go build -trimpath -overlay "$ovl/overlay.json" -ldflags "$ldflags" -o "$dir/bin/windows/kubelet.exe" ./cmd/kubelet)
	chmod -R u+w "$ksrc"
	rm -rf "$ksrc" "$ovl"
	mark windows/kubelet.exe "$kubelet_version"
fi

# containerd-shim-runhcs-v1.exe: the incumbent shim, hcsshim at the version
# winproc's go.mod requires, built for Windows with build/runhcs-wine.patch
# (Wine's defects only) into DIR/bin/windows, for the Windows node's second
# runtime handler (`make peer`, docs/peer.md). The Go module proxy does not
# serve cosesign1go, which its security policy package (of confidential
# utility VMs, never called here) needs to compile: the build uses the stub
# of shim/hcs/testdata/oracle/cosesign1go.
root=$(cd "$(dirname "$0")/.." && pwd)
runhcs_patch=$root/build/runhcs-wine.patch
hcsshim_version=$(cd "$root" && GOFLAGS= go list -m -f '{{.Version}}' github.com/Microsoft/hcsshim)
runhcs_version="$hcsshim_version+$(go env GOVERSION)+$(sha256sum "$runhcs_patch" | cut -c1-12)"
if ! stamp windows/containerd-shim-runhcs-v1.exe "$runhcs_version"; then
	echo "tools: building containerd-shim-runhcs-v1.exe (hcsshim $hcsshim_version) with $(basename "$runhcs_patch")"
	mod=$(cd "$root" && GOFLAGS= go list -m -f '{{.Dir}}' github.com/Microsoft/hcsshim)
	runhcs_src=$(mktemp -d)
	cp -r "$mod/." "$runhcs_src"
	chmod -R u+w "$runhcs_src"
	mkdir -p "$dir/bin/windows"
	(cd "$runhcs_src" && git apply "$runhcs_patch" &&
		go mod edit -replace "github.com/Microsoft/cosesign1go=$root/shim/hcs/testdata/oracle/cosesign1go" &&
		GOOS=windows GOARCH=amd64 go build -trimpath -o "$dir/bin/windows/" ./cmd/containerd-shim-runhcs-v1)
	chmod -R u+w "$runhcs_src"
	rm -rf "$runhcs_src"
	mark windows/containerd-shim-runhcs-v1.exe "$runhcs_version"
fi

# critest.exe: cri-tools' CRI conformance suite at crictl's version, for
# `make conformance` (docs/conformance.md).
if ! stamp windows/critest.exe $crictl_version; then
	echo "tools: building critest.exe $crictl_version for the Windows node"
	mod=$(GONOSUMDB=sigs.k8s.io/cri-tools GOFLAGS= go mod download -json sigs.k8s.io/cri-tools@$crictl_version |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	critest_src=$(mktemp -d)
	cp -r "$mod/." "$critest_src"
	chmod -R u+w "$critest_src"
	rm -rf "$critest_src/vendor"
	mkdir -p "$dir/bin/windows"
	# critest is a test binary (cmd/critest holds a suite), built as the
	# project's Makefile builds it: go test -c.
	(cd "$critest_src" && GOOS=windows GOARCH=amd64 go test -c -trimpath -o "$dir/bin/windows/critest.exe" ./cmd/critest)
	chmod -R u+w "$critest_src"
	rm -rf "$critest_src"
	mark windows/critest.exe $crictl_version
fi
