package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-kit/log/level"
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
