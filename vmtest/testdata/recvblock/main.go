// Command recvblock is a process unrelated to the KDC that keeps N threads
// blocked in a receive system call (recvfrom on a blocking IPv4 UDP socket
// of its own, bound to 127.0.0.1), each call held inside the kernel's
// inet_recvmsg: what any local user can run. make test-vm-kernels starts
// it in the guest (vmtest/kernel_test.go, checkMissedReturns).
//
//	recvblock N
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

func main() {
	n, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if len(os.Args) != 2 || err != nil || n < 1 || n > 1024 {
		fmt.Fprintln(os.Stderr, "usage: recvblock N (1 to 1024 threads)")
		os.Exit(2)
	}
	for range n {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "recvblock:", err)
			os.Exit(1)
		}
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			fmt.Fprintln(os.Stderr, "recvblock:", err)
			os.Exit(1)
		}
		go func() {
			// A thread of its own, blocked in the kernel: the socket is
			// blocking (not the runtime's poller) and nothing sends to it.
			runtime.LockOSThread()
			buf := make([]byte, 1)
			for {
				syscall.Recvfrom(fd, buf, 0)
			}
		}()
	}
	select {}
}
