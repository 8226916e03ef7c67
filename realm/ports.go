package realm

import (
	"fmt"
	"net"
	"strconv"
)

// assignPorts picks free loopback ports for what Opts left at zero. The
// KDC needs one number free for both UDP and TCP.
func (r *Realm) assignPorts() error {
	var err error
	if r.KDCPort = r.Opts.KDCPort; r.KDCPort == 0 {
		if r.KDCPort, err = freePort(true); err != nil {
			return err
		}
	} else if err := portFree(r.KDCPort, true); err != nil {
		return err
	}
	if r.KadmindPort = r.Opts.KadmindPort; r.KadmindPort == 0 {
		if r.KadmindPort, err = freePort(false); err != nil {
			return err
		}
	} else if err := portFree(r.KadmindPort, false); err != nil {
		return err
	}
	// kpasswd listens on UDP and TCP as well.
	for {
		if r.KpasswdPort, err = freePort(true); err != nil {
			return err
		}
		if r.KpasswdPort != r.KadmindPort && r.KpasswdPort != r.KDCPort {
			break
		}
	}
	r.KDCAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KDCPort))
	r.KadmindAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KadmindPort))
	return nil
}

// freePort asks the kernel for a free TCP port and, with udp, checks the
// same number is free for UDP too.
func freePort(udp bool) (int, error) {
	for tries := 0; tries < 50; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("realm: no free loopback port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !udp {
			l.Close()
			return port, nil
		}
		u, err := net.ListenPacket("udp", l.Addr().String())
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("realm: no loopback port free for both UDP and TCP")
}

// portFree reports a clear error when a pinned port is taken.
func portFree(port int, udp bool) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("realm: port %s/tcp is already in use", addr)
	}
	l.Close()
	if udp {
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return fmt.Errorf("realm: port %s/udp is already in use", addr)
		}
		u.Close()
	}
	return nil
}
