package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log/level"
	"github.com/go-logfmt/logfmt"
)

func TestLevelFilterAndFormat(t *testing.T) {
	var buf bytes.Buffer
	l, sl, err := New(&Config{Level: "warn", Format: "json"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	level.Info(l).Log("msg", "hidden")
	level.Warn(l).Log("msg", "shown")
	sl.Error("from slog", "k", "v")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines (warn and slog error), got %q", buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil || m["msg"] != "shown" || m["level"] != "warn" || m["ts"] == nil {
		t.Errorf("bad JSON line %q: %v", lines[0], err)
	}
	if !strings.Contains(lines[1], `"from slog"`) || !strings.Contains(lines[1], `"k":"v"`) {
		t.Errorf("slog bridge line: %q", lines[1])
	}
}

func TestBadValues(t *testing.T) {
	if _, _, err := New(&Config{Level: "loud"}, &bytes.Buffer{}); err == nil {
		t.Error("unknown level accepted")
	}
	if _, _, err := New(&Config{Format: "xml"}, &bytes.Buffer{}); err == nil {
		t.Error("unknown format accepted")
	}
}

// One stream: a line of ours and a line of a slog library have the same
// keys, level ts caller msg first and in that order in logfmt, the same
// names in json, and caller names the code that logged (issue 8 item 5:
// exporter-toolkit's lines had time= after caller=).
func TestOneStream(t *testing.T) {
	for _, format := range []string{"logfmt", "json"} {
		var buf bytes.Buffer
		l, sl, err := New(&Config{Level: "debug", Format: format}, &buf)
		if err != nil {
			t.Fatal(err)
		}
		level.Info(l).Log("msg", "ours", "k", "v")
		_, _, line, _ := runtime.Caller(0)
		sl.Info("theirs", "k", "v")
		sl.WithGroup("g").With("a", 1).Debug("grouped", "b", 2)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 3 {
			t.Fatalf("%s: want 3 lines, got %q", format, buf.String())
		}
		wantCaller := []string{fmt.Sprintf("logging_test.go:%d", line-1), fmt.Sprintf("logging_test.go:%d", line+1), fmt.Sprintf("logging_test.go:%d", line+2)}
		for i, text := range lines {
			keys, vals := parseLine(t, format, text)
			if len(keys) < 4 || (format == "logfmt" && strings.Join(keys[:4], " ") != "level ts caller msg") {
				t.Errorf("%s line %d keys %v, want level ts caller msg first: %s", format, i, keys, text)
				continue
			}
			for _, k := range []string{"level", "ts", "caller", "msg"} {
				if _, ok := vals[k]; !ok {
					t.Errorf("%s line %d has no %s: %s", format, i, k, text)
				}
			}
			for _, k := range []string{"time", "source", "t"} {
				if _, ok := vals[k]; ok {
					t.Errorf("%s line %d has a second time or caller key %q: %s", format, i, k, text)
				}
			}
			if _, err := time.Parse(time.RFC3339Nano, vals["ts"]); err != nil || !strings.HasSuffix(vals["ts"], "Z") {
				t.Errorf("%s line %d: ts %q is not UTC RFC 3339: %v", format, i, vals["ts"], err)
			}
			if vals["caller"] != wantCaller[i] {
				t.Errorf("%s line %d: caller %q, want %q", format, i, vals["caller"], wantCaller[i])
			}
		}
		if _, v := parseLine(t, format, lines[2]); v["level"] != "debug" || v["g.a"] != "1" || v["g.b"] != "2" {
			t.Errorf("%s: grouped slog line %q", format, lines[2])
		}
	}
}

// parseLine returns a line's keys in order (logfmt; sorted for json) and
// its values as text.
func parseLine(t *testing.T, format, line string) ([]string, map[string]string) {
	t.Helper()
	vals := map[string]string{}
	var keys []string
	if format == "json" {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		for k, v := range m {
			keys = append(keys, k)
			vals[k] = fmt.Sprint(v)
		}
		return keys, vals
	}
	d := logfmt.NewDecoder(strings.NewReader(line))
	for d.ScanRecord() {
		for d.ScanKeyval() {
			keys = append(keys, string(d.Key()))
			vals[string(d.Key())] = string(d.Value())
		}
	}
	if d.Err() != nil {
		t.Fatalf("not logfmt: %q: %v", line, d.Err())
	}
	return keys, vals
}

// The first event of a key passes, later ones within the interval are held
// and counted in the next one that passes; keys are independent.
func TestLimiter(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := NewLimiter(time.Minute)
	l.now = func() time.Time { return now }
	if held, ok := l.Allow("a"); !ok || held != 0 {
		t.Fatalf("first: %d %v", held, ok)
	}
	for range 5 {
		if _, ok := l.Allow("a"); ok {
			t.Fatal("a repeat within the interval passed")
		}
	}
	if _, ok := l.Allow("b"); !ok {
		t.Error("another key was held")
	}
	now = now.Add(time.Minute)
	if held, ok := l.Allow("a"); !ok || held != 5 {
		t.Errorf("after the interval: %d %v, want 5 held", held, ok)
	}
	if _, ok := l.Allow("a"); ok {
		t.Error("the interval did not start again")
	}
	// Pass logs whatever the interval, says how many were held and
	// starts the interval again.
	l.Allow("a")
	if held := l.Pass("a"); held != 2 {
		t.Errorf("Pass: %d held, want 2", held)
	}
	if _, ok := l.Allow("a"); ok {
		t.Error("the interval did not start again after Pass")
	}
	if held := l.Pass("c"); held != 0 {
		t.Errorf("Pass of a new key: %d held", held)
	}
}
