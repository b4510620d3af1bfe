package main

import (
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	iphlpapi         = windows.NewLazySystemDLL("iphlpapi.dll")
	procIcmpCreate   = iphlpapi.NewProc("IcmpCreateFile")
	procIcmpClose    = iphlpapi.NewProc("IcmpCloseHandle")
	procIcmpSendEcho = iphlpapi.NewProc("IcmpSendEcho")
)

// icmpEchoReply is ICMP_ECHO_REPLY (ipexport.h), 64-bit layout.
type icmpEchoReply struct {
	Address       uint32
	Status        uint32
	RoundTripTime uint32
	DataSize      uint16
	Reserved      uint16
	Data          uintptr
	Options       [16]byte
}

// icmpEcho sends one ICMP echo request to host's IPv4 address with
// IcmpSendEcho, as Windows' ping.exe does, and returns the round trip.
func icmpEcho(host string, timeout time.Duration) (time.Duration, error) {
	ips, err := net.LookupIP(host)
	if err != nil {
		return 0, fmt.Errorf("resolve %s: %w", host, err)
	}
	var dst uint32
	for _, ip := range ips {
		if v4 := ip.To4(); v4 != nil {
			dst = uint32(v4[0]) | uint32(v4[1])<<8 | uint32(v4[2])<<16 | uint32(v4[3])<<24
			break
		}
	}
	if dst == 0 {
		return 0, fmt.Errorf("%s has no IPv4 address", host)
	}
	h, _, err := procIcmpCreate.Call()
	if windows.Handle(h) == windows.InvalidHandle {
		return 0, fmt.Errorf("IcmpCreateFile: %w", err)
	}
	defer procIcmpClose.Call(h)
	data := []byte("abcdefghijklmnopqrstuvwabcdefghi")
	reply := make([]byte, int(unsafe.Sizeof(icmpEchoReply{}))+len(data)+8)
	n, _, err := procIcmpSendEcho.Call(h, uintptr(dst), uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), 0,
		uintptr(unsafe.Pointer(&reply[0])), uintptr(len(reply)), uintptr(timeout.Milliseconds()))
	if n == 0 {
		return 0, fmt.Errorf("IcmpSendEcho: %w", err)
	}
	r := (*icmpEchoReply)(unsafe.Pointer(&reply[0]))
	if r.Status != 0 {
		return 0, fmt.Errorf("IcmpSendEcho: status %d", r.Status)
	}
	return time.Duration(r.RoundTripTime) * time.Millisecond, nil
}
