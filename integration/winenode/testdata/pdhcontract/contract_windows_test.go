//go:build windows

// Package pdhcontract holds the contract tests of the node's stand-in
// pdh.dll (../standins/pdh.c): one case per behaviour the stand-in
// promises, each naming the PDH reference page it follows, with the calls
// the kubelet's binding makes (github.com/JeffAshton/win_pdh, as
// k8s.io/kubernetes pkg/kubelet/winstats perfcounters.go uses it).
// TestPDHStandin (../../kubeletnode_test.go) runs them under Wine with the
// stand-in in a private prefix's System32.
package pdhcontract

import (
	"net"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

const (
	errorSuccess         = 0
	cstatusNoObject      = 0xC0000BB8
	cstatusNoCounter     = 0xC0000BB9
	cstatusInvalidData   = 0xC0000BBA
	cstatusBadName       = 0xC0000BC0
	pdhMoreData          = 0x800007D2
	pdhNoData            = 0x800007D5
	pdhInvalidHandle     = 0xC0000BBC
	pdhInvalidData       = 0xC0000BC6
	fmtDouble            = 0x200
	workingSetPrivate    = `\Process(_Total)\Working Set - Private`
	committedBytes       = `\Memory\Committed Bytes`
	processorTime        = `\Processor(_Total)\% Processor Time`
	bytesReceivedPerSec  = `\Network Adapter(*)\Bytes Received/sec`
	packetsRecvDiscarded = `\Network Adapter(*)\Packets Received Discarded`
)

var (
	pdh              = windows.NewLazySystemDLL("pdh.dll")
	openQuery        = pdh.NewProc("PdhOpenQuery")
	closeQuery       = pdh.NewProc("PdhCloseQuery")
	addEnglish       = pdh.NewProc("PdhAddEnglishCounterW")
	addCounter       = pdh.NewProc("PdhAddCounterW")
	collect          = pdh.NewProc("PdhCollectQueryData")
	formattedValue   = pdh.NewProc("PdhGetFormattedCounterValue")
	formattedArray   = pdh.NewProc("PdhGetFormattedCounterArrayW")
	validatePath     = pdh.NewProc("PdhValidatePathW")
	kubeletsCounters = []string{
		processorTime, workingSetPrivate, committedBytes,
		`\Network Adapter(*)\Packets Received/sec`, `\Network Adapter(*)\Packets Sent/sec`,
		bytesReceivedPerSec, `\Network Adapter(*)\Bytes Sent/sec`,
		packetsRecvDiscarded, `\Network Adapter(*)\Packets Received Errors`,
		`\Network Adapter(*)\Packets Outbound Discarded`, `\Network Adapter(*)\Packets Outbound Errors`,
	}
)

// fmtValue is PDH_FMT_COUNTERVALUE, and item PDH_FMT_COUNTERVALUE_ITEM_W.
type fmtValue struct {
	CStatus uint32
	_       uint32
	Double  float64
}

type item struct {
	Name  *uint16
	Value fmtValue
}

func call(p *windows.LazyProc, args ...uintptr) uint32 {
	r, _, _ := syscall.SyscallN(p.Addr(), args...)
	return uint32(r)
}

func str(s string) uintptr { return uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(s))) }

// query opens a query (PdhOpenQuery: a NULL source is real-time data)
// that the test closes.
func query(t *testing.T) uintptr {
	t.Helper()
	var q uintptr
	if r := call(openQuery, 0, 0, uintptr(unsafe.Pointer(&q))); r != errorSuccess {
		t.Fatalf("PdhOpenQuery: %#x", r)
	}
	t.Cleanup(func() {
		if r := call(closeQuery, q); r != errorSuccess {
			t.Errorf("PdhCloseQuery: %#x", r)
		}
	})
	return q
}

func add(t *testing.T, q uintptr, path string) uintptr {
	t.Helper()
	var c uintptr
	if r := call(addEnglish, q, str(path), 0, uintptr(unsafe.Pointer(&c))); r != errorSuccess {
		t.Fatalf("PdhAddEnglishCounterW(%s): %#x", path, r)
	}
	return c
}

// array reads a counter's values as the kubelet's getQueriedData does:
// a first call with no room answers PDH_MORE_DATA and the size, a second
// fills the buffer (PdhGetFormattedCounterArrayW).
func array(t *testing.T, c uintptr) map[string]fmtValue {
	t.Helper()
	var size, count uint32
	var empty [1]item
	if r := call(formattedArray, c, fmtDouble, uintptr(unsafe.Pointer(&size)), uintptr(unsafe.Pointer(&count)), uintptr(unsafe.Pointer(&empty[0]))); r != pdhMoreData {
		t.Fatalf("PdhGetFormattedCounterArrayW with no room: %#x, want PDH_MORE_DATA", r)
	}
	buf := make([]item, count*uint32(unsafe.Sizeof(item{})))
	if r := call(formattedArray, c, fmtDouble, uintptr(unsafe.Pointer(&size)), uintptr(unsafe.Pointer(&count)), uintptr(unsafe.Pointer(&buf[0]))); r != errorSuccess {
		t.Fatalf("PdhGetFormattedCounterArrayW: %#x", r)
	}
	got := make(map[string]fmtValue, count)
	for _, it := range buf[:count] {
		got[windows.UTF16PtrToString(it.Name)] = it.Value
	}
	return got
}

// PdhAddCounter: every counter the kubelet adds at its start is added and
// its path valid (PdhValidatePath), in English and localized names alike.
func TestKubeletsCountersAdded(t *testing.T) {
	q := query(t)
	for _, path := range kubeletsCounters {
		add(t, q, path)
		var c uintptr
		if r := call(addCounter, q, str(path), 0, uintptr(unsafe.Pointer(&c))); r != errorSuccess {
			t.Errorf("PdhAddCounterW(%s): %#x", path, r)
		}
		if r := call(validatePath, str(path)); r != errorSuccess {
			t.Errorf("PdhValidatePathW(%s): %#x", path, r)
		}
	}
}

// PdhAddCounter's return values: an unknown object, an unknown counter of
// a known object, and a path not of the form \Object(Instance)\Counter.
func TestBadPathsRefused(t *testing.T) {
	q := query(t)
	for _, tc := range []struct {
		path string
		want uint32
	}{
		{`\No Such Object\Counter`, cstatusNoObject},
		{`\Memory\No Such Counter`, cstatusNoCounter},
		{`Memory`, cstatusBadName},
		{`\Memory`, cstatusBadName},
		{`\Process(_Total\Working Set - Private`, cstatusBadName},
	} {
		var c uintptr
		if r := call(addEnglish, q, str(tc.path), 0, uintptr(unsafe.Pointer(&c))); r != tc.want {
			t.Errorf("PdhAddEnglishCounterW(%s): %#x, want %#x", tc.path, r, tc.want)
		}
		if r := call(validatePath, str(tc.path)); r != tc.want {
			t.Errorf("PdhValidatePathW(%s): %#x, want %#x", tc.path, r, tc.want)
		}
	}
}

// PdhCollectQueryData: a query with no counter has no data; a handle that
// is not a query is PDH_INVALID_HANDLE.
func TestCollectRefusals(t *testing.T) {
	if r := call(collect, query(t)); r != pdhNoData {
		t.Errorf("PdhCollectQueryData of an empty query: %#x, want PDH_NO_DATA", r)
	}
	var junk [64]byte
	if r := call(collect, uintptr(unsafe.Pointer(&junk[0]))); r != pdhInvalidHandle {
		t.Errorf("PdhCollectQueryData of junk: %#x, want PDH_INVALID_HANDLE", r)
	}
	if r := call(collect, 0); r != pdhInvalidHandle {
		t.Errorf("PdhCollectQueryData(NULL): %#x, want PDH_INVALID_HANDLE", r)
	}
}

// PdhCollectQueryData's remarks: a rate counter needs two samples; with
// one, PdhGetFormattedCounterValue answers PDH_INVALID_DATA.
func TestRateNeedsTwoSamples(t *testing.T) {
	q := query(t)
	c := add(t, q, processorTime)
	if r := call(collect, q); r != errorSuccess {
		t.Fatalf("PdhCollectQueryData: %#x", r)
	}
	var v fmtValue
	if r := call(formattedValue, c, fmtDouble, 0, uintptr(unsafe.Pointer(&v))); r != pdhInvalidData || v.CStatus != cstatusInvalidData {
		t.Errorf("one sample: %#x, CStatus %#x; want PDH_INVALID_DATA, PDH_CSTATUS_INVALID_DATA", r, v.CStatus)
	}
	if r := call(collect, q); r != errorSuccess {
		t.Fatalf("PdhCollectQueryData: %#x", r)
	}
	if r := call(formattedValue, c, fmtDouble, 0, uintptr(unsafe.Pointer(&v))); r != errorSuccess || v.CStatus != errorSuccess || v.Double < 0 || v.Double > 100 {
		t.Errorf("two samples: %#x, CStatus %#x, %v%%; want a percentage", r, v.CStatus, v.Double)
	}
}

// PdhGetFormattedCounterArray, the kubelet's way: _Total's working set and
// the committed bytes are the node's, more than nothing.
func TestArrayOfSingleValues(t *testing.T) {
	q := query(t)
	ws, committed := add(t, q, workingSetPrivate), add(t, q, committedBytes)
	if r := call(collect, q); r != errorSuccess {
		t.Fatalf("PdhCollectQueryData: %#x", r)
	}
	for _, tc := range []struct {
		counter uintptr
		name    string
	}{{ws, "_Total"}, {committed, ""}} {
		got := array(t, tc.counter)
		if v, ok := got[tc.name]; len(got) != 1 || !ok || v.CStatus != errorSuccess || v.Double <= 0 {
			t.Errorf("%q: %+v; want one value, more than 0", tc.name, got)
		}
	}
}

// \Network Adapter(*): an instance per adapter but the loopback, each
// with its rate once sampled twice and its count from the first sample.
func TestNetworkAdapters(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	adapters := 0
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			adapters++
		}
	}
	q := query(t)
	rate, count := add(t, q, bytesReceivedPerSec), add(t, q, packetsRecvDiscarded)
	if r := call(collect, q); r != errorSuccess {
		t.Fatalf("PdhCollectQueryData: %#x", r)
	}
	for name, v := range array(t, rate) {
		if v.CStatus != cstatusInvalidData {
			t.Errorf("%s's rate after one sample: CStatus %#x, want PDH_CSTATUS_INVALID_DATA", name, v.CStatus)
		}
	}
	if r := call(collect, q); r != errorSuccess {
		t.Fatalf("PdhCollectQueryData: %#x", r)
	}
	for _, c := range []uintptr{rate, count} {
		got := array(t, c)
		if len(got) != adapters {
			t.Errorf("%d instances %v, want the %d adapters but loopback of %v", len(got), got, adapters, ifs)
		}
		for name, v := range got {
			if name == "" || v.CStatus != errorSuccess || v.Double < 0 {
				t.Errorf("%q: %+v", name, v)
			}
		}
	}
}
