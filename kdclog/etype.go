package kdclog

// Etype is a Kerberos encryption type number as the KDC logs it: bare before
// MIT 1.18 ("rep=18"), in parentheses after the name since ("rep=aes256-...(18)").
type Etype int32

// EtypeNone marks an absent etype (a TGS failure has no ticket, 1.18+ logs
// "rep=UNSUPPORTED:(0)" there).
const EtypeNone Etype = 0

// etypeInfo is what the collector needs about one etype: its label value
// (MIT's canonical name, so both log formats give the same series) and
// whether it is weak (single DES, 3DES, RC4: deprecated by RFC 6649/8429).
type etypeInfo struct {
	num  Etype
	name string
	weak bool
}

// etypes is the fixed etype label set. Numbers from RFC 3961/3962/8009/6803/
// 4757 and MIT's krb5.h; names as krb5_enctype_to_name prints them.
var etypes = [...]etypeInfo{
	{1, "des-cbc-crc", true},
	{2, "des-cbc-md4", true},
	{3, "des-cbc-md5", true},
	{4, "des-cbc-raw", true},
	{5, "des3-cbc-md5", true},
	{6, "des3-cbc-raw", true},
	{7, "des3-hmac-sha1", true},
	{8, "des-hmac-sha1", true},
	{16, "des3-cbc-sha1", true},
	{17, "aes128-cts-hmac-sha1-96", false},
	{18, "aes256-cts-hmac-sha1-96", false},
	{19, "aes128-cts-hmac-sha256-128", false},
	{20, "aes256-cts-hmac-sha384-192", false},
	{23, "arcfour-hmac", true},
	{24, "arcfour-hmac-exp", true},
	{25, "camellia128-cts-cmac", false},
	{26, "camellia256-cts-cmac", false},
}

// etypeByNum maps the small etype numbers (all of the table) to their
// index in etypes, -1 when absent; a direct array keeps the lookup free of
// hashing on the hot path.
var etypeByNum = func() (m [32]int8) {
	for i := range m {
		m[i] = -1
	}
	for i, e := range etypes {
		m[e.num] = int8(i)
	}
	return m
}()

// numEtypeLabels is the size of the etype label set: the table plus "other".
const numEtypeLabels = len(etypes) + 1

const etypeOther = len(etypes)

// etypeLabel returns the label index of e, etypeOther for numbers not in
// the table.
func etypeLabel(e Etype) int {
	if e >= 0 && int(e) < len(etypeByNum) && etypeByNum[e] >= 0 {
		return int(etypeByNum[e])
	}
	return etypeOther
}

func etypeName(i int) string {
	if i == etypeOther {
		return "other"
	}
	return etypes[i].name
}

// IsWeak reports whether e is a single-DES, 3DES or RC4 type.
func (e Etype) IsWeak() bool {
	if i := etypeLabel(e); i != etypeOther {
		return etypes[i].weak
	}
	// Microsoft's negative private RC4/DES variants (-128 .. -141).
	return e <= -128 && e >= -141
}
