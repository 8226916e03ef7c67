package config

import (
	"strings"
	"testing"
	"unicode"
)

// Names that become label values and lines of `top` refuse control and
// format characters: a probe name holding "\e]0;..." or "\e[2J" rewrote
// the terminal of whoever ran top (issue 26 item 8). The error names the
// file and line and shows the name escaped.
func TestControlCharactersInNamesRefused(t *testing.T) {
	const module = "modules:\n  m: {realm: R, client: c, keytab: KT}\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"ESC in a probe name", module + "probes:\n  - name: \"kdc\\e[2J\\e]0;owned\\a\"\n    address: 127.0.0.1\n    module: m\n",
			`x.yml:4: probes.0.name: name "kdc\x1b[2J\x1b]0;owned\a" contains the control character U+001B`},
		{"C1 CSI in a probe name", module + "probes:\n  - {name: \"a\\x9b31m\", address: 127.0.0.1, module: m}\n",
			`x.yml:4: probes.0.name: name "a\u009b31m" contains the control character U+009B`},
		{"bidi override in a probe name", module + "probes:\n  - {name: \"a\\u202eb\", address: 127.0.0.1, module: m}\n",
			`x.yml:4: probes.0.name: name "a\u202eb" contains the control character U+202E`},
		{"CR in a module name", "modules:\n  \"m\\rx\": {realm: R, client: c, keytab: KT}\n",
			`x.yml:2: modules."m\rx": module name "m\rx" contains the control character U+000D`},
		{"ESC in a log path", "logs:\n  - {path: \"/var/log/kdc\\e[8m.log\", type: kdc}\n",
			`x.yml:2: logs.0.path: path "/var/log/kdc\x1b[8m.log" contains the control character U+001B`},
		{"ESC in a journal identifier", "logs:\n  - type: kdc\n    journal: {identifiers: [\"krb5kdc\\e[2J\"]}\n",
			`x.yml:3: logs.0.journal.identifiers.0: `},
		{"ESC in a journal directory", "logs:\n  - type: kdc\n    journal: {directory: \"/j\\e\"}\n",
			`x.yml:3: logs.0.journal.directory: directory "/j\x1b" contains the control character U+001B`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(probeFiles(t, tc.yaml)), "x.yml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
			if i := strings.IndexFunc(err.Error(), unicode.IsControl); i >= 0 {
				t.Errorf("a control character in the error: %q", err)
			}
		})
	}
	// A name with spaces and non-ASCII letters stays valid.
	if _, err := Parse([]byte(probeFiles(t, module+"probes:\n  - {name: \"kdc 1 Zürich\", address: 127.0.0.1, module: m}\n")), "x.yml"); err != nil {
		t.Error(err)
	}
}
