// Package docs holds the reference documentation; its test keeps the
// links between the pages true.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code    = regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")
	heading = regexp.MustCompile("(?m)^#+ +(.+)$")
)

// anchorOf is GitHub's anchor of a heading: lower case, spaces to
// hyphens, everything but letters, digits, hyphens and underscores dropped.
func anchorOf(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(t *testing.T, path string) map[string]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inCode := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if m := heading.FindStringSubmatch(l); m != nil && !inCode {
			out[anchorOf(m[1])] = true
		}
	}
	return out
}

// TestLinks: every relative link of the README, the pages of docs/ and the
// runbook names a file of the repository and, with #anchor, a heading of it.
func TestLinks(t *testing.T) {
	pages, _ := filepath.Glob("*.md")
	pages = append(pages, "../README.md", "../CHANGELOG.md", "../alerts/runbook.md")
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(code.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: no file %s", page, target, path)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[frag] {
				t.Errorf("%s: link %s: no heading #%s in %s", page, target, frag, path)
			}
		}
	}
}
