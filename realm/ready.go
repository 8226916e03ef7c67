package realm

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// waitKDC polls until the KDC answers an AS-REQ. It uses TCP so that at
// most one request is ever outstanding: UDP datagrams sent while the KDC
// is still starting would queue and each be answered (and logged) later.
func waitKDC(ctx context.Context, realm, addr string) error {
	req, err := readyRequest(realm)
	if err != nil {
		return err
	}
	var last error
	for {
		if last = askKDC(ctx, addr, req); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ASRequest encodes an AS-REQ for a TGT of client, without
// pre-authentication: the KDC answers it with a KRB-ERROR
// (PREAUTH_REQUIRED, or C_PRINCIPAL_UNKNOWN for a client that does not
// exist) and logs one line. Tests use it to make known KDC traffic.
func ASRequest(realm, client string) ([]byte, error) {
	c := config.New()
	c.LibDefaults.DefaultTktEnctypeIDs = []int32{18, 17}
	as, err := messages.NewASReqForTGT(realm, c, types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, client))
	if err != nil {
		return nil, fmt.Errorf("realm: %w", err)
	}
	b, err := as.Marshal()
	if err != nil {
		return nil, fmt.Errorf("realm: %w", err)
	}
	return b, nil
}

func readyRequest(realm string) ([]byte, error) {
	b, err := ASRequest(realm, ReadyPrincipal)
	if err != nil {
		return nil, err
	}
	framed := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(framed, uint32(len(b)))
	copy(framed[4:], b)
	return framed, nil
}

// askKDC sends one framed request over TCP and checks that a Kerberos
// message (KRB-ERROR or AS-REP) comes back.
func askKDC(ctx context.Context, addr string, req []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write(req); err != nil {
		return err
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size == 0 || size > 1<<20 {
		return fmt.Errorf("implausible reply length %d", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	switch body[0] {
	case 0x7e: // [APPLICATION 30] KRB-ERROR
		var ke messages.KRBError
		return ke.Unmarshal(body)
	case 0x6b: // [APPLICATION 11] AS-REP
		return nil
	}
	return fmt.Errorf("reply is not a Kerberos message (tag 0x%02x)", body[0])
}
