//go:build !linux

package collector

import "errors"

func kdcNetns(string, int) netnsRelation { return otherNetns }

var errNoSockDiag = errors.New("sock_diag is Linux only")

func sockDiagTCP(uint32, []uint16) ([]inetSocket, error) { return nil, errNoSockDiag }

type diagConn struct{}

func openDiag([]byte) (*diagConn, error)                         { return nil, errNoSockDiag }
func (*diagConn) close()                                         {}
func (*diagConn) dumpTCP(uint32, []uint16) ([]inetSocket, error) { return nil, errNoSockDiag }
func (*diagConn) dumpUDP() ([]inetSocket, error)                 { return nil, errNoSockDiag }
func (*diagConn) lookup(inetSocket) (inetSocket, bool, error) {
	return inetSocket{}, false, errNoSockDiag
}
