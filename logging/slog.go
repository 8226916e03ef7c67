package logging

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// slogHandler writes slog records (exporter-toolkit's) through the go-kit
// logger as the project's own lines look: level, ts (UTC, RFC 3339 with
// nanoseconds, as log.DefaultTimestampUTC), caller (file.go:line of the
// code that logged), msg, then the attributes, groups joined with dots.
type slogHandler struct {
	logger log.Logger // level-filtered, without ts and caller
	min    slog.Level
	attrs  []any  // key-value pairs from WithAttrs
	group  string // "a.b." from WithGroup
}

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	kv := make([]any, 0, 8+len(h.attrs)+2*r.NumAttrs())
	kv = append(kv, level.Key(), levelValue(r.Level),
		tsKey, t.UTC().Format(time.RFC3339Nano),
		callerKey, caller(r.PC),
		msgKey, r.Message)
	kv = append(kv, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		kv = appendAttr(kv, h.group, a)
		return true
	})
	return h.logger.Log(kv...)
}

func (h *slogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]any{}, h.attrs...)
	for _, a := range as {
		n.attrs = appendAttr(n.attrs, h.group, a)
	}
	return &n
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.group = h.group + name + "."
	return &n
}

// appendAttr flattens a into key-value pairs, group members as group.key.
func appendAttr(kv []any, prefix string, a slog.Attr) []any {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return kv
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			kv = appendAttr(kv, p, g)
		}
		return kv
	}
	return append(kv, prefix+a.Key, a.Value.Any())
}

func levelValue(l slog.Level) level.Value {
	switch {
	case l < slog.LevelInfo:
		return level.DebugValue()
	case l < slog.LevelWarn:
		return level.InfoValue()
	case l < slog.LevelError:
		return level.WarnValue()
	}
	return level.ErrorValue()
}

// caller is file.go:line of pc, as log.DefaultCaller prints it.
func caller(pc uintptr) string {
	if pc == 0 {
		return "unknown"
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return filepath.Base(f.File) + ":" + strconv.Itoa(f.Line)
}
