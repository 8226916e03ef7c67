package krb5

import (
	"fmt"
	"net"
	"os"
	"time"
)

const echoServerEnv = "KRB5_PROBER_UDP_ECHO"

// runEchoServer answers every datagram with itself after the delay given in
// the environment variable (a KDC takes a few hundred microseconds), printing
// its address first.
func runEchoServer() {
	delay, _ := time.ParseDuration(os.Getenv(echoServerEnv))
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(c.LocalAddr())
	buf := make([]byte, udpBufSize)
	for {
		n, a, err := c.ReadFromUDPAddrPort(buf)
		if err == nil {
			if delay > 0 {
				time.Sleep(delay)
			}
			c.WriteToUDPAddrPort(buf[:n], a)
		}
	}
}
