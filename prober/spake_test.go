package prober

import (
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

func TestSPAKELoginQuick(t *testing.T) {
	r := upRealm(t, realm.Options{})
	c := userClient(t, r, 1, Options{})
	defer c.Close()
	as, err := c.Login(testCtx(t, 10*time.Second))
	t.Logf("%+v %v", as, err)
	if err != nil {
		t.Fatal(err)
	}
}
