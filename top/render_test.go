package top

import "testing"

// Printable escapes C0, DEL, C1, format characters, backslashes and bytes
// that are not UTF-8, and leaves other text, non-ASCII letters included.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"kdc1.example.com": "kdc1.example.com",
		"Zürich 2":         "Zürich 2",
		"a\x1b[2Jb":        `a\x1b[2Jb`,
		"\r\t\a\x00\x7f":   `\r\t\a\x00\x7f`,
		"\u0085\u009b":     `\u0085\u009b`,
		"a\u202eb":         `a\u202eb`,
		`a\x1b`:            `a\\x1b`,
		"a\x9bb\xff":       `a\x9bb\xff`,
		"\ufffd":           "\ufffd",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %s, want %s", in, got, want)
		}
	}
}
