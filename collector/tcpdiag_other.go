//go:build !linux

package collector

import "errors"

func kdcNetns(string, int) netnsRelation { return otherNetns }

func sockDiagTCP(uint32, []uint16) ([]tcpSocket, error) {
	return nil, errors.New("sock_diag is Linux only")
}
