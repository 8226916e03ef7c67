//go:build !linux

package collector

import "errors"

func kdcNetns(string, int) netnsRelation { return otherNetns }

func sockDiagTCP(states uint32, ports []uint16) ([]tcpSocket, error) {
	return sockDiagTCPBuf(states, ports, nil)
}

func sockDiagTCPBuf(uint32, []uint16, []byte) ([]tcpSocket, error) {
	return nil, errors.New("sock_diag is Linux only")
}
