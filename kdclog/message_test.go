package kdclog

import (
	"bufio"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"testing"
)

// A journal entry carries program, pid and message apart; ParseMessage on
// them must give what Parse gives for the same line in a file. The fields
// are cut out of the captured lines by a regular expression, not by the
// parser's own header code.
func TestParseMessageMatchesParse(t *testing.T) {
	re := regexp.MustCompile(`^[A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d \S+ ([a-z0-9_.]+)\[(\d+)\](?:\(\w+\))?: (.*)$`)
	n := 0
	for _, fixture := range []string{"testdata/mit-1.20-kdc.log", "testdata/mit-1.20-kadmind.log", "testdata/mit-1.20-workers-kdc.log"} {
		f, err := os.Open(fixture)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Bytes()
			m := re.FindSubmatch(line)
			if m == nil {
				continue
			}
			pid, _ := strconv.Atoi(string(m[2]))
			var want, got Event
			wok := Parse(line, &want)
			var p Parser
			gok := p.ParseMessage(m[1], pid, m[3], &got)
			if wok != gok || !reflect.DeepEqual(want, got) {
				t.Fatalf("%s: %q\nParse        %v %+v\nParseMessage %v %+v", fixture, line, wok, want, gok, got)
			}
			n++
		}
		f.Close()
	}
	if n < 100 {
		t.Fatalf("only %d fixture lines compared", n)
	}
}
