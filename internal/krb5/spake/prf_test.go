package spake

import (
	"bytes"
	"testing"

	"github.com/jcmturner/gokrb5/v8/crypto"
)

// PRF vectors: RFC 8009 appendix A for the aes-sha2 enctypes, MIT's
// src/lib/crypto/crypto_tests/t_prf.c for aes-sha1.
func TestPRF(t *testing.T) {
	for _, c := range []struct {
		etype            int32
		key, input, want string
	}{
		{EtypeAES128SHA1, "AE272E7CDEC86AC5138CDB196D8E297D", "0161", "77B39A37A868920F2A51F9DD150C5717"},
		{EtypeAES128SHA1, "67AB1CFEF35E4C27FFDEAC60385A3E9C", "0162", "E06C0DD31FF02091994F2EF5178BFE3D"},
		{EtypeAES256SHA1, "C01F157211F7B77EAAF457C3E156690127EE127D810BA6392E97BAA243EB0616", "0161", "B2628C788E2E9C4A9BB4644678C29F2F"},
		{EtypeAES256SHA1, "C01F157211F7B77EAAF457C3E156690127EE127D810BA6392E97BAA243EB0616", "0261", "B406373350CEE8A6126F4A9B65A0CD21"},
		{EtypeAES256SHA1, "9D520D2D980AA7CB6B693682B62DA258B333867951642CE647AE62B1E5E0B5E9", "0162", "FF0E289EA756C0559A0E911856961A49"},
		{EtypeAES256SHA1, "9D520D2D980AA7CB6B693682B62DA258B333867951642CE647AE62B1E5E0B5E9", "0262", "0D674DD0F9A6806525A4D92E828BD15A"},
		{EtypeAES128SHA256, "3705D96080C17728A0E800EAB6E0D23C", "74657374",
			"9D188616F63852FE86915BB840B4A886FF3E6BB0F819B49B893393D393854295"},
		{EtypeAES256SHA384, "6D404D37FAF79F9DF0D33568D320669800EB4836472EA8A026D16B7182460C52", "74657374",
			"9801F69A368C2BF675E59521E177D9A07F67EFE1CFDE8D3C8D6F6A0256E3B17DB3C1B62AD1B8553360D17367EB1514D2"},
	} {
		got, err := PRF(nil, c.etype, unh(t, c.key), unh(t, c.input))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, unh(t, c.want)) {
			t.Errorf("PRF(%d, %s, %s) = %X, want %s", c.etype, c.key, c.input, got, c.want)
		}
	}
}

// TestPRFPlus checks PRF+ against its definition: the MIT t_prf.c inputs
// 01 61 and 02 61 under one aes256-sha1 key are PRF+(key, "a") blocks 1 and 2.
func TestPRFPlus(t *testing.T) {
	key := unh(t, "C01F157211F7B77EAAF457C3E156690127EE127D810BA6392E97BAA243EB0616")
	got, err := PRFPlus(nil, EtypeAES256SHA1, key, []byte("a"), 20)
	if err != nil {
		t.Fatal(err)
	}
	want := unh(t, "B2628C788E2E9C4A9BB4644678C29F2F"+"B4063733")
	if !bytes.Equal(got, want) {
		t.Fatalf("PRF+ = %X, want %X", got, want)
	}
}

// TestCF2 uses MIT's t_cf2.in/t_cf2.expected: keys from string-to-key of
// "key1"/"key1" and "key2"/"key2" (password and salt alike), peppers "a", "b".
func TestCF2(t *testing.T) {
	for _, c := range []struct {
		etype int32
		want  string
	}{
		{EtypeAES128SHA1, "97df97e4b798b29eb31ed7280287a92a"},
		{EtypeAES256SHA1, "4d6ca4e629785c1f01baf55e2e548566b9617ae3a96868c337cb93b5e72b1c7b"},
		{EtypeAES128SHA256, "edd02a39d2dbde31611c16e610be062c"},
		{EtypeAES256SHA384, "67f6ea530aea85a37dcbb23349ea52dcc61ca8493ff557252327fd8304341584"},
	} {
		et, err := crypto.GetEtype(c.etype)
		if err != nil {
			t.Fatal(err)
		}
		k1, err := et.StringToKey("key1", "key1", et.GetDefaultStringToKeyParams())
		if err != nil {
			t.Fatal(err)
		}
		k2, err := et.StringToKey("key2", "key2", et.GetDefaultStringToKeyParams())
		if err != nil {
			t.Fatal(err)
		}
		got, err := CF2(nil, c.etype, k1, "a", k2, "b")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, unh(t, c.want)) {
			t.Errorf("CF2 enctype %d = %x, want %s", c.etype, got, c.want)
		}
	}
}

func TestPRFErrors(t *testing.T) {
	if _, err := PRF(nil, 23, make([]byte, 16), nil); err == nil {
		t.Error("PRF accepted enctype 23")
	}
	if _, err := PRF(nil, EtypeAES256SHA1, make([]byte, 16), nil); err == nil {
		t.Error("PRF accepted a 16-byte key for enctype 18")
	}
	if _, err := NewKey(EtypeAES256SHA1, make([]byte, 32), GroupP521); err == nil {
		t.Error("NewKey accepted group P-521")
	}
}
