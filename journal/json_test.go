package journal

import (
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"
)

// oracle decodes a line with encoding/json the way journalctl's output is
// meant: strings, null, or arrays of byte values.
func oracle(line []byte) (fields map[string][]byte, ok bool) {
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil || m == nil { // "null" is no object
		return nil, false
	}
	fields = map[string][]byte{}
	for k, v := range m {
		switch v := v.(type) {
		case string:
			fields[k] = []byte(v)
		case nil:
		case []any:
			b := []byte{}
			for _, x := range v {
				f, isNum := x.(float64)
				if !isNum || f != float64(int(f)) || f < 0 || f > 255 {
					return nil, false
				}
				b = append(b, byte(f))
			}
			fields[k] = b
		default:
			return nil, false
		}
	}
	return fields, true
}

func check(t *testing.T, line []byte) {
	t.Helper()
	var j jsonEntry
	got := j.parse(line)
	want, ok := oracle(line)
	if !utf8.Valid(line) {
		return // journalctl writes invalid UTF-8 as byte arrays, never raw
	}
	if got != ok {
		t.Fatalf("%q: parse=%v, encoding/json=%v", line, got, ok)
	}
	if !got {
		return
	}
	if string(j.message) != string(want["MESSAGE"]) || string(j.ident) != string(want["SYSLOG_IDENTIFIER"]) ||
		string(j.cursor) != string(want["__CURSOR"]) {
		t.Fatalf("%q: got message %q ident %q cursor %q; want %q %q %q", line, j.message, j.ident, j.cursor,
			want["MESSAGE"], want["SYSLOG_IDENTIFIER"], want["__CURSOR"])
	}
	pid := 0
	for _, k := range []string{"_PID", "SYSLOG_PID"} {
		if v, ok := want[k]; ok && pid == 0 {
			if n, err := strconv.Atoi(string(v)); err == nil && n >= 0 {
				pid = n
			}
		}
	}
	if j.pid != pid {
		t.Fatalf("%q: pid %d, want %d", line, j.pid, pid)
	}
	// The trusted fields, each in its own buffer: an escaped value
	// survives the keys and values parsed after it.
	for k, got := range map[string][]byte{"_COMM": j.comm, "_SYSTEMD_UNIT": j.unit, "OBJECT_COMM": j.objComm,
		"OBJECT_SYSTEMD_UNIT": j.objUnit, "_BOOT_ID": j.boot} {
		if string(got) != string(want[k]) {
			t.Fatalf("%q: %s %q, want %q", line, k, got, want[k])
		}
	}
	for k, got := range map[string]int64{"_UID": j.uid, "OBJECT_UID": j.objUID} {
		uid := int64(-1)
		if n, err := strconv.ParseUint(string(want[k]), 10, 32); err == nil {
			uid = int64(n)
		}
		if got != uid {
			t.Fatalf("%q: %s %d, want %d", line, k, got, uid)
		}
	}
	for k, got := range map[string]uint64{"__REALTIME_TIMESTAMP": j.realtime, "__MONOTONIC_TIMESTAMP": j.monotonic} {
		n, _ := strconv.ParseUint(string(want[k]), 10, 64)
		if got != n {
			t.Fatalf("%q: %s %d, want %d", line, k, got, n)
		}
	}
}

var jsonSeeds = []string{
	`{"MESSAGE":"AS_REQ (4 etypes {aes256-cts-hmac-sha384-192(20)}) 127.0.0.1: ISSUE: authtime 1","_PID":"4242","SYSLOG_IDENTIFIER":"krb5kdc","__CURSOR":"s=1;i=2"}`,
	`{"__CURSOR":"s=a;i=1f","MESSAGE":[65,66,0,255],"SYSLOG_PID":"7","SYSLOG_IDENTIFIER":"kadmind"}`,
	`{"MESSAGE":null,"__CURSOR":"c","_PID":"x"}`,
	`{"MESSAGE":"tab\there \"quoted\" back\\slash \u00e9 \ud83d\ude00 \u0000","__CURSOR":"c"}`,
	`{ "MESSAGE" : "spaces" , "__CURSOR" : "c" }`,
	`{}`,
	`{"MESSAGE":"unterminated`,
	`{"MESSAGE":1}`,
	`{"MESSAGE":[256]}`,
	`{"MESSAGE":"a"}x`,
	`{"MESSAGE":"bad \q escape"}`,
	`[]`,
	`{"__CURSOR":"c","_COMM":"krb\u0035kdc","_UID":"\u0030","X":"\u0041","_SYSTEMD_UNIT":"krb5-kdc\u002eservice","OBJECT_COMM":"k\"","OBJECT_UID":"4294967296","OBJECT_SYSTEMD_UNIT":[107,100,99],"_BOOT_ID":"b\u0031","__REALTIME_TIMESTAMP":"17","__MONOTONIC_TIMESTAMP":"x","MESSAGE":"m\u0021"}`,
	`{"__CURSOR":"c","_UID":"-1","OBJECT_UID":"107","_COMM":null}`,
}

func TestJSONAgainstEncodingJSON(t *testing.T) {
	for _, s := range jsonSeeds {
		check(t, []byte(s))
	}
	// Whatever encoding/json writes for any message bytes reads back.
	for _, msg := range []string{"plain", "ünïcödé", "\x00\x01\x1f", "\"\\/", "\xff\xfe invalid utf-8"} {
		b, _ := json.Marshal(map[string]string{"MESSAGE": msg, "__CURSOR": "s=1;i=1", "_PID": "12"})
		check(t, b)
	}
}

func FuzzJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) { check(t, line) })
}

func TestJSONParseAllocatesNothing(t *testing.T) {
	line := []byte(`{"MESSAGE":"AS_REQ \"x\" (4 etypes {aes256-cts-hmac-sha384-192(20)})","_PID":"4242","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc","_UID":"0","_SYSTEMD_UNIT":"krb5-kdc.service","__CURSOR":"s=1;i=2","X":[1,2,3]}`)
	var j jsonEntry
	j.parse(line) // grow the buffers
	if n := testing.AllocsPerRun(100, func() { j.parse(line) }); n != 0 {
		t.Errorf("%v allocations per entry", n)
	}
}

func BenchmarkJSON(b *testing.B) {
	line := []byte(`{"__CURSOR":"s=e20c02781db140019055600d68811d2c;i=4;b=0123456789abcdef0123456789abcdef;m=0;t=644dae5400004;x=881bb74add0","__REALTIME_TIMESTAMP":"1764556800000004","__MONOTONIC_TIMESTAMP":"0","_BOOT_ID":"0123456789abcdef0123456789abcdef","_TRANSPORT":"syslog","_UID":"0","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc","_PID":"4242","_SYSTEMD_UNIT":"krb5-kdc.service","MESSAGE":"AS_REQ (4 etypes {aes256-cts-hmac-sha384-192(20), aes128-cts-hmac-sha256-128(19), aes256-cts-hmac-sha1-96(18), aes128-cts-hmac-sha1-96(17)}) 127.0.0.1: ISSUE: authtime 1796000000, etypes {rep=aes256-cts-hmac-sha384-192(20), tkt=aes256-cts-hmac-sha384-192(20), ses=aes256-cts-hmac-sha384-192(20)}, user0001@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST"}`)
	var j jsonEntry
	b.SetBytes(int64(len(line)))
	for i := 0; i < b.N; i++ {
		j.parse(line)
	}
}
