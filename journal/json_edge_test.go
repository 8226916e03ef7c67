package journal

import "testing"

// Lines at the edges of the scanner's grammar, each checked against
// encoding/json (check): every \u hex digit range at both ends and just
// outside, every short escape, surrogate pairs and lone halves, strings,
// escapes and arrays cut short, byte arrays at 255/256 and with
// whitespace, PIDs that are not numbers, keys written with escapes, and
// what may not follow a value. Written to kill the mutants gremlins left
// alive (docs/testing.md).
var jsonEdges = []string{
	`{"MESSAGE":"\u0030\u0039\u0061\u0066\u0041\u0046\u00aF\uFfFf"}`,
	`{"MESSAGE":"\u002f"}`, `{"MESSAGE":"\u003a"}`, `{"MESSAGE":"\u00g0"}`, `{"MESSAGE":"\u00G0"}`,
	"{\"MESSAGE\":\"\\u00`0\"}", `{"MESSAGE":"\u00@0"}`, `{"MESSAGE":"\u00/0"}`, `{"MESSAGE":"\u00:0"}`,
	`{"MESSAGE":"\b\f\n\r\t\/\\\""}`, `{"MESSAGE":"x\by"}`,
	`{"MESSAGE":"\ud83d\ude00"}`, `{"MESSAGE":"\ud83d x"}`, `{"MESSAGE":"\ud83d\u0041"}`, `{"MESSAGE":"\ude00"}`,
	`{"MESSAGE":"\ud83d\ud83d\ude00"}`, `{"MESSAGE":"\ud83d\"}`, `{"MESSAGE":"\ud83d\u12"}`, `{"MESSAGE":"\ud83d\`,
	`{"MESSAGE":"\u00e`, `{"MESSAGE":"\u00e"}`, `{"MESSAGE":"\`, `{"MESSAGE":"a\"`, `{"MESSAGE":"\"`,
	"{\"MESSAGE\":\"a\x01\"}", "{\"MESSAGE\":\"\\n\x1f\"}", "{\"MESSAGE\":\"\\n\x20\"}",
	`{"MESSAGE":[]}`, `{"MESSAGE":[ ]}`, `{"MESSAGE":[ 1 , 2 ]}`, `{"MESSAGE":[255,0,9]}`, `{"MESSAGE":[256]}`,
	`{"MESSAGE":[1000]}`, `{"MESSAGE":[1,]}`, `{"MESSAGE":[,1]}`, `{"MESSAGE":[1 2]}`, `{"MESSAGE":[1`, `{"MESSAGE":[`,
	`{"MESSAGE":[-1]}`, `{"MESSAGE":[a]}`,
	`{"_PID":"-5","SYSLOG_PID":"7"}`, `{"_PID":"0","SYSLOG_PID":"7"}`, `{"_PID":"12","SYSLOG_PID":"7"}`,
	`{"SYSLOG_PID":"7","_PID":"12"}`, `{"_PID":"x","SYSLOG_PID":"x"}`, `{"_PID":null,"SYSLOG_PID":"3"}`,
	`{"MESS\u0041GE":"escaped key","SYSLOG_IDENTIFIER":"krb5kdc","__CURSOR":"c"}`,
	`{"SYSLOG_IDENTIFIER":"a\"b","__CURSOR":"s\\1","MESSAGE":"m"}`,
	"\t{\n\"MESSAGE\"\r: \"x\" ,\"__CURSOR\" :\"c\"}\n", ` {} `, `{ }`,
	`{"MESSAGE":nul}`, `{"MESSAGE":nulls}`, `{"MESSAGE":null}`, `{"MESSAGE":n`,
	`{"MESSAGE":"x",}`, `{"MESSAGE":"x" "y":"z"}`, `{"MESSAGE":"x"`, `{`, ``, `{"a":"b"}}`, `{"a" "b"}`, `{a:"b"}`,
	`{"a":"b"]`, `{"MESSAGE":true}`,
}

func TestJSONEdges(t *testing.T) {
	for _, s := range jsonEdges {
		check(t, []byte(s))
	}
}

// The scanner's buffers are reused: a field read with escapes in one
// entry does not leak into the next entry without them.
func TestJSONBuffersReused(t *testing.T) {
	var j jsonEntry
	if !j.parse([]byte(`{"MESSAGE":"a\nb","SYSLOG_IDENTIFIER":"k\"d","__CURSOR":"c\\1"}`)) {
		t.Fatal("first entry")
	}
	if !j.parse([]byte(`{"MESSAGE":"plain","__CURSOR":"c2"}`)) {
		t.Fatal("second entry")
	}
	if string(j.message) != "plain" || j.ident != nil || string(j.cursor) != "c2" || j.pid != 0 {
		t.Errorf("second entry: message %q ident %q cursor %q pid %d", j.message, j.ident, j.cursor, j.pid)
	}
}
