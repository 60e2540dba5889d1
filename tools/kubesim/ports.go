package main

import (
	"fmt"
	"net"
	"strconv"
)

// portFree reports whether 127.0.0.1:port can be bound right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// choosePort decides the port for one part. An explicit port must be free.
// With no explicit port, the previous one is reused when it is free, and a
// new free port is picked otherwise.
func choosePort(part string, explicit, previous int, taken map[int]bool) (int, error) {
	if explicit > 0 {
		if taken[explicit] || !portFree(explicit) {
			return 0, fmt.Errorf("%s: port %d is in use", part, explicit)
		}
		taken[explicit] = true
		return explicit, nil
	}
	if previous > 0 && !taken[previous] && portFree(previous) {
		taken[previous] = true
		return previous, nil
	}
	for range 20 {
		p, err := freePort()
		if err != nil {
			return 0, fmt.Errorf("%s: no free port: %w", part, err)
		}
		if !taken[p] {
			taken[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("%s: no free port", part)
}
