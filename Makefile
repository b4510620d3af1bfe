# winproc: `make test` is what CI runs; it installs what it needs (Wine, the
# MinGW compiler, the pinned containerd and crictl) by itself.

GO          ?= go
TOOLS_DIR   ?= $(CURDIR)/.tools
WINE_PREFIX ?= $(TOOLS_DIR)/wine/prefix
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -s -w -X github.com/winproc/winproc/internal/version.Version=$(VERSION)

# Every main package lives in cmd/<binary>.
COMMANDS := $(notdir $(wildcard cmd/*))
# Packages whose Windows test binaries run under Wine.
WINE_TEST_PACKAGES := ./pause/... ./cmd/containerd-shim-winproc-v2/... ./wincat/... ./shim/hcs/... ./shim/jobcontainer/... ./shim/scratch/... ./shim/relay/... ./shim/procexit/... ./shim/hostprocess/... ./shim/record/... ./shim/compute/... ./shim/specconv/... ./shim/winpath/... ./internal/wincmdline/... ./cmd/winproc-testapp/... ./cmd/winproc-snapshotter/... ./snapshotter/layertar/... ./winbuild/... ./internal/containerdconn/... ./shim/process/... ./internal/dllguard/...

export WINPROC_WINE_PREFIX := $(WINE_PREFIX)
export WINPROC_TOOLS := $(TOOLS_DIR)/bin
export PATH := $(TOOLS_DIR)/bin:$(PATH)
export CGO_ENABLED := 0
# gRPC-Go without golang.org/x/net/trace, whose /debug/requests pages no
# winproc binary serves: its html/template reaches reflect's MethodByName,
# which keeps every exported method of every type in the binary. Without it
# the shim's text is 1.2 MB smaller, and in `make bench` its RSS idle goes
# from 14.9 to 12.4 MiB and serving a pod from 17.9 to 15.0 MiB (the
# binary's pages are most of it). Every go command here gets the tag: the
# builds, the tests, and the binaries the integration tests build.
export GOFLAGS := -tags=grpcnotrace

.PHONY: all build windows tools wine test fmt-check vet unit integration windows-check wine-test fuzz clean

all: build windows

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ $(addprefix ./cmd/,$(COMMANDS))

windows:
	GOOS=windows GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/windows/ $(addprefix ./cmd/,$(COMMANDS))

tools:
	bash build/tools.sh $(TOOLS_DIR)

wine:
	bash build/wine/setup.sh $(WINE_PREFIX)

test: tools wine fmt-check vet windows-check windows unit integration wine-node wine-test fuzz demo

fmt-check:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$bad" ]; then echo "not gofmt-formatted:"; echo "$$bad"; exit 1; fi

vet:
	$(GO) vet ./...

# Every Windows file must compile and vet, even though nothing here runs HCS.
windows-check:
	GOOS=windows GOARCH=amd64 $(GO) build ./...
	GOOS=windows GOARCH=amd64 $(GO) vet ./...

# The module's packages by the target that tests them: `integration` the
# emulated node's (integration/ but the Windows node), `wine-node` the
# Windows node's (integration/winenode), `unit` every other package. Listed
# when a target needs them; together they are `go list ./...`.
MODULE            = $(shell $(GO) list -m)
ALL_PACKAGES      = $(shell $(GO) list ./...)
WINE_NODE_PACKAGES = $(filter $(MODULE)/integration/winenode $(MODULE)/integration/winenode/%,$(ALL_PACKAGES))
INTEGRATION_PACKAGES = $(filter-out $(WINE_NODE_PACKAGES),$(filter $(MODULE)/integration $(MODULE)/integration/%,$(ALL_PACKAGES)))
UNIT_PACKAGES     = $(filter-out $(MODULE)/integration $(MODULE)/integration/%,$(ALL_PACKAGES))

# One package at a time: the Wine and containerd tests measure timings that
# parallel packages would disturb on a 2-core machine. `unit` runs the
# packages' own tests, Wine's included (the emulation, the Windows test
# programs, the stand-ins' contracts); no containerd.
unit:
	$(GO) test -count=1 -p 1 $(UNIT_PACKAGES)

# The integration tests under the real containerd and crictl on the
# emulated node (integration/, integration/node, integration/emulatednode).
integration: tools wine
	$(GO) test -count=1 -p 1 $(INTEGRATION_PACKAGES)

# Lists the packages of each test target, one a line, to check that
# together they are the module's.
.PHONY: list-test-packages
list-test-packages:
	@printf 'unit %s\n' $(UNIT_PACKAGES)
	@printf 'integration %s\n' $(INTEGRATION_PACKAGES)
	@printf 'wine-node %s\n' $(WINE_NODE_PACKAGES)

# Packages that hand pointers to a DLL run their Windows tests a second
# time with a stack move at every function entry: a pointer converted to
# uintptr outside the system call's expression then goes stale (Go's
# unsafe.Pointer rule 4), where an ordinary run almost never shows it.
# shim/hcs's TestComputecoreBindingUnderWine and shim/jobcontainer's
# TestJobObjectsUnderWine (in `unit`) do the same, with the node's
# stand-in HCS (integration/winenode/testdata/standins) and with real job
# objects.
BINDING_PACKAGES := ./shim/hcs/... ./shim/jobcontainer/...
MOVE_STACKS := -gcflags=all=-d=maymorestack=runtime.mayMoreStackMove

# The tests of doctor's and the snapshotter's Windows-only code (their
# *_windows_test.go files), run as Windows test binaries under Wine; the
# rest of those packages' tests run in `unit`.
DOCTOR_WINDOWS_TESTS      := ^(TestAccessOf|TestWindowsLeftovers|TestHCSTerminations)$$
SNAPSHOTTER_WINDOWS_TESTS := ^TestParallelUnpackRefusedOnWindows$$

wine-test:
	GOOS=windows GOARCH=amd64 $(GO) test -count=1 -exec $(CURDIR)/build/wine/go-exec.sh $(WINE_TEST_PACKAGES)
	GOOS=windows GOARCH=amd64 $(GO) test -count=1 $(MOVE_STACKS) -exec $(CURDIR)/build/wine/go-exec.sh $(BINDING_PACKAGES)
	GOOS=windows GOARCH=amd64 $(GO) test -count=1 -run '$(DOCTOR_WINDOWS_TESTS)' -exec $(CURDIR)/build/wine/go-exec.sh ./doctor/
	GOOS=windows GOARCH=amd64 $(GO) test -count=1 -run '$(SNAPSHOTTER_WINDOWS_TESTS)' -exec $(CURDIR)/build/wine/go-exec.sh ./snapshotter/

# The Windows node under Wine (integration/winenode): the pinned containerd
# built for Windows, winproc-snapshotter.exe as its proxy plugins, the shim
# as containerd.exe launches it, `winproc doctor`, and crictl.exe driving
# containerd.exe's own Windows CRI through HostProcess and ordinary pods
# (with MinGW stand-ins of HCS, HCN, the layer functions and the bind
# filter), in private Wine prefixes, and the stock kubelet.exe driving
# static pods through containerd.exe. Some 4 to 7 minutes on 2 cores;
# `test` runs it. The winenode package alone outgrows go test's default
# 10-minute timeout on a loaded machine, hence 30.
.PHONY: wine-node
wine-node: tools wine
	$(GO) test -count=1 -p 1 -timeout 30m -v $(WINE_NODE_PACKAGES)

# The stock kubelet's tier alone (integration/winenode
# TestKubeletStaticPods, which `wine-node` runs with the rest; some 75 s):
# kubelet.exe (build/tools.sh, with build/kubelet-wine.patch) standalone
# against containerd.exe, running a HostProcess and an ordinary static pod
# with probes, through to their removal.
.PHONY: kubelet-node
kubelet-node: tools wine
	$(GO) test -count=1 -timeout 20m -v -run '^TestKubeletStaticPods$$' ./integration/winenode/

# cri-tools' CRI conformance suite (critest.exe, built by build/tools.sh at
# crictl's version) against containerd.exe's Windows CRI on the Windows node
# under Wine, winproc the default handler, in both sandbox modes, and
# against the incumbent runhcs (integration/winenode TestConformance,
# docs/conformance.md): JUnit reports and logs in CONFORMANCE_DIR, the
# table in docs/conformance.md (after all three runs; CONFORMANCE_RUNS,
# e.g. `runhcs`, makes only the runs named). Not part of `test` (it takes
# longer than its 5 minutes): CI runs the two winproc runs as a step of its
# own (.ci/run).
CONFORMANCE_DIR ?= $(CURDIR)/build/conformance
CONFORMANCE_RUNS ?=
.PHONY: conformance
conformance: tools wine
	mkdir -p $(CONFORMANCE_DIR)
	WINPROC_CONFORMANCE=$(CONFORMANCE_DIR) WINPROC_CONFORMANCE_DOC=$(CURDIR)/docs/conformance.md \
		WINPROC_CONFORMANCE_RUNS=$(CONFORMANCE_RUNS) \
		$(GO) test -count=1 -timeout 90m -v -run '^TestConformance$$' ./integration/winenode/

# The OCI specs containerd's CRI makes for realistic Windows pods, the
# corpora of the HCS document's differential test against runhcs (shim/hcs
# document_oracle_test.go, run by `unit`): written by the emulated node's
# Linux CRI, by containerd.exe's own Windows CRI on the Windows node under
# Wine, and by containerd.exe for the stock kubelet's ordinary static pod
# there. Rerun after changing the corpus's pods, containerd or the kubelet.
.PHONY: spec-corpus
spec-corpus: tools wine
	rm -f shim/hcs/testdata/corpus/*.json shim/hcs/testdata/corpus-wincri/*.json shim/hcs/testdata/corpus-kubelet/*.json
	WINPROC_WRITE_SPEC_CORPUS=$(CURDIR)/shim/hcs/testdata/corpus $(GO) test -count=1 -v -run '^TestWriteSpecCorpus$$' ./integration/
	WINPROC_WRITE_WINCRI_SPEC_CORPUS=$(CURDIR)/shim/hcs/testdata/corpus-wincri $(GO) test -count=1 -v -run '^TestWriteWindowsCRISpecCorpus$$' ./integration/winenode/
	WINPROC_WRITE_KUBELET_SPEC_CORPUS=$(CURDIR)/shim/hcs/testdata/corpus-kubelet $(GO) test -count=1 -timeout 20m -v -run '^TestKubeletStaticPods$$' ./integration/winenode/

# The performance benchmarks and the scale run, not part of `test`: the
# shim's (resident memory next to containerd's runc shim, task API latency
# through containerd and direct), pulls (sequential against parallel unpack,
# one pull against two, through ctr and crictl from a registry on loopback;
# PULL_ROUNDS rounds, docs/pull.md), the layer importer against GNU tar, and
# the scale run (SCALE_PODS pods with a container each, kept running: latency
# per tenth, idle CPU, memory per pod, teardown; docs/scale.md).
SCALE_PODS  ?= 100
PULL_ROUNDS ?= 3
.PHONY: bench
bench: tools wine
	WINPROC_PULL_ROUNDS=$(PULL_ROUNDS) $(GO) test -count=1 -timeout 1h -run '^$$' -bench . -benchtime 1x ./integration/
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkImport$$' -benchtime 9x ./snapshotter/layertar/
	WINPROC_SCALE_PODS=$(SCALE_PODS) $(GO) test -count=1 -timeout 1h -v -run '^TestScale$$' ./integration/

# runhcs as a live peer, not part of `test` (docs/peer.md): winproc (both
# sandbox modes) and containerd-shim-runhcs-v1.exe (build/tools.sh) on one
# Windows node under Wine, PEER_ROUNDS alternating rounds of PEER_PODS pods
# with a container each, PEER_PROBES exec probes (PEER_GROWTH_PROBES in the
# first round, for memory growth), and the teardown; it rewrites the table
# of docs/peer.md. The full size takes about an hour.
PEER_ROUNDS        ?= 3
PEER_PODS          ?= 30
PEER_PROBES        ?= 200
PEER_GROWTH_PROBES ?= 500
.PHONY: peer
peer: tools wine
	WINPROC_PEER=1 WINPROC_PEER_ROUNDS=$(PEER_ROUNDS) WINPROC_PEER_PODS=$(PEER_PODS) WINPROC_PEER_PROBES=$(PEER_PROBES) WINPROC_PEER_GROWTH_PROBES=$(PEER_GROWTH_PROBES) WINPROC_PEER_OUT=$(CURDIR)/docs/peer.md \
		$(GO) test -count=1 -timeout 4h -v -run '^TestPeer$$' ./integration/winenode/

# Long runs, not part of `test`: SOAK_CYCLES pod cycles through crictl and
# containerd (a table every 100 cycles; fails on a lost byte, a leak,
# descriptor growth or slowing down), and FAULT_PODS serving pods through
# restarts of containerd and the snapshotter, a killed shim and a full disk,
# then FAULT_PODS new pods through each of the emulation's faults (a frozen
# silo, a dead wineserver, a busy mount, a held cgroup) while crictl stops
# and removes them; it prints a table of calls within their deadline, pods
# removed and anything left.
SOAK_CYCLES ?= 1000
FAULT_PODS  ?= 20
.PHONY: soak faults
soak: tools wine
	WINPROC_SOAK_CYCLES=$(SOAK_CYCLES) $(GO) test -count=1 -timeout 6h -run '^TestSoak$$' -v ./integration/

faults: tools wine
	WINPROC_FAULT_PODS=$(FAULT_PODS) $(GO) test -count=1 -timeout 1h -run '^TestFaults$$' -v ./integration/
	WINPROC_FAULT_PODS=$(FAULT_PODS) $(GO) test -count=1 -timeout 20m -run '^(TestCRIFaults|TestRebootThenDoctorFix)$$' -v ./integration/winenode/

# Every fuzz target, as package:Target. `make fuzz` (part of `test`) runs
# each for FUZZTIME_SHORT; `make fuzz-long` runs each for FUZZTIME.
# FUZZTIME_SHORT is a count of executions (a few seconds per target here):
# Go 1.26's coordinator can fail a duration-bounded run with "context
# deadline exceeded" at its end, with no crasher (golang/go#75804, fixed in
# Go 1.27); a count has no deadline to race.
FUZZ_TARGETS := \
	./snapshotter/layertar:FuzzImport \
	./snapshotter/layertar:FuzzImportEntries \
	./snapshotter/layermount:FuzzDecode \
	./cri:FuzzFromCreateSandbox \
	./shim/specconv:FuzzFromSpec \
	./internal/wincmdline:FuzzJoinSplit \
	./winbuild:FuzzParse
FUZZTIME_SHORT ?= 30000x
FUZZTIME       ?= 5m
# Minimizing a new input is bounded by a count of executions: Go's
# byte-slice minimizer is quadratic in the input's size, and under the
# default 60 s time bound the coordinator kills the worker when the time is
# up and drops its executions, which stalled the tar fuzzers at 0 execs/s.
FUZZMINIMIZE   ?= 100x

# fuzz-targets fuzzes every target in turn for $(1); $(2) is appended to
# each command.
define fuzz-targets
	for t in $(FUZZ_TARGETS); do \
		cmd="$(GO) test -run=^\$$ -fuzz=^$${t#*:}\$$ -fuzztime=$(1) -fuzzminimizetime=$(FUZZMINIMIZE) $${t%%:*} $(2)"; \
		echo "$$cmd"; $$cmd; \
	done
endef

# Short runs start from the seed corpus (f.Add and testdata/fuzz) in a
# throwaway cache: before fuzzing, Go replays every input cached in
# $(go env GOCACHE)/fuzz, a few ms each as the coverage map crosses the
# worker pipe as JSON, and the hundreds that long runs collect would take
# all of a short run's time. Long runs keep and grow that cache.
.PHONY: fuzz-long
fuzz:
	@set -e; cache=$$(mktemp -d); trap 'rm -rf "$$cache"' EXIT; \
	$(call fuzz-targets,$(FUZZTIME_SHORT),-args -test.fuzzcachedir=$$cache/$${t%%:*})

fuzz-long:
	@set -e; $(call fuzz-targets,$(FUZZTIME))

# winproc end to end on an emulated Windows node, as a terminal transcript:
# containerd with the generated config, winproc-snapshotter, images built
# with `winproc image`, a pod through crictl, the test app in it, logs, exec,
# port-forward through wincat, statistics, teardown. Leaves nothing behind.
.PHONY: demo
demo: tools wine build windows
	bin/winproc-demo -tools $(WINPROC_TOOLS) -wine-prefix $(WINE_PREFIX) -bin $(CURDIR)/bin -windows-bin $(CURDIR)/bin/windows

clean:
	rm -rf bin
