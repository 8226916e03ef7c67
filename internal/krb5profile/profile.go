// Package krb5profile reads MIT krb5 profile files (kdc.conf, krb5.conf)
// as libprofile does: the collectors read the KDC's settings from them,
// the log collector its [logging] targets.
package krb5profile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// This file reads MIT krb5 profile files (kdc.conf, krb5.conf) the way
// libprofile does (util/profile/prof_parse.c): "[section]" headers, "tag =
// value" relations, "tag = {" ... "}" subsections (the brace may be on the
// next line), whole-line comments starting with '#' or ';', quoted values
// with \n \t \b escapes, '*' final markers on sections, subsections and
// tags, and the top-level "include FILE" / "includedir DIR" directives.
// Lines before the first section header are ignored, as in MIT.

// maxIncludeDepth bounds include nesting (and so include cycles).
const maxIncludeDepth = 5

// maxProfileFile bounds each profile file read: MIT's own are a few KiB.
const maxProfileFile = 1 << 20

// profNode is a section, subsection or relation.
type profNode struct {
	name     string
	value    string // relations only
	isGroup  bool   // section or subsection
	final    bool
	children []*profNode
	file     string // relations only: where it was read
	line     int
}

func (n *profNode) add(c *profNode) *profNode {
	n.children = append(n.children, c)
	return c
}

// section returns the top-level section name, creating it: MIT merges
// repeated section headers of one file into one section.
func (n *profNode) section(name string) *profNode {
	for _, c := range n.children {
		if c.isGroup && c.name == name {
			return c
		}
	}
	return n.add(&profNode{name: name, isGroup: true})
}

// File is one parsed top-level file with the files it pulled in.
type File struct {
	root *profNode
	// Files are the file and every included file, in read order.
	Files []string
}

// Error is a syntax error with its position, or a file that could not be
// read.
type Error struct {
	Path string
	Line int // 0: the file as a whole
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// ParseFile parses path and its includes into one tree.
func ParseFile(path string) (*File, error) {
	pf := &File{root: &profNode{isGroup: true}}
	if err := pf.parse(path, 0, nil); err != nil {
		return nil, err
	}
	return pf, nil
}

func (pf *File) parse(path string, depth int, stack []string) error {
	if depth > maxIncludeDepth {
		return &Error{Path: path, Msg: fmt.Sprintf("includes nested deeper than %d (include loop through %s?)", maxIncludeDepth, strings.Join(stack, " -> "))}
	}
	// A FIFO put at kdc.conf's path must fail the scrape's parse, not
	// hang every scrape from now on.
	data, _, err := safefile.ReadFile(path, maxProfileFile, 0)
	if err != nil {
		msg := err.Error()
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			msg = pe.Op + ": " + pe.Err.Error() // the path is the profileError's
		}
		return &Error{Path: path, Msg: msg}
	}
	pf.Files = append(pf.Files, path)
	return pf.parseData(path, data, depth, append(stack, path))
}

type parseState int

const (
	stateInitComment parseState = iota // before the first section
	stateStdLine
	stateGetOBrace // "tag =" seen, "{" must come next
)

func (pf *File) parseData(path string, data []byte, depth int, stack []string) error {
	state := stateInitComment
	// open[0] is the current section, then the open subsections.
	var open []*profNode
	lineNo := 0
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 0, 4096), 1<<20)
	for s.Scan() {
		lineNo++
		line := strings.TrimRight(s.Text(), "\r")
		fail := func(format string, a ...any) error {
			return &Error{Path: path, Line: lineNo, Msg: fmt.Sprintf(format, a...)}
		}
		// Directives must start in column 0 and are honoured in any state.
		if arg, ok := directive(line, "includedir"); ok {
			if err := pf.includeDir(arg, depth, stack); err != nil {
				return fail("includedir %s: %v", arg, err)
			}
			continue
		}
		if arg, ok := directive(line, "include"); ok {
			if err := pf.parse(arg, depth+1, stack); err != nil {
				return err
			}
			continue
		}
		switch state {
		case stateInitComment:
			if _, ok := directive(line, "module"); ok {
				return fail("the module directive (profile from a plugin) is not supported")
			}
			if !strings.HasPrefix(line, "[") {
				continue
			}
			state = stateStdLine
		case stateGetOBrace:
			if !strings.HasPrefix(strings.TrimLeft(line, " \t"), "{") {
				return fail("missing '{' after %q =", open[len(open)-1].name)
			}
			state = stateStdLine
			continue
		}

		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		switch t[0] {
		case '[':
			if len(open) > 1 {
				return fail("section header %q inside subsection %q (missing '}'?)", t, open[len(open)-1].name)
			}
			end := strings.IndexByte(t, ']')
			if end <= 1 {
				return fail("bad section header %q", t)
			}
			sec := pf.root.section(t[1:end])
			rest := t[end+1:]
			if strings.HasPrefix(rest, "*") {
				sec.final = true
				rest = rest[1:]
			}
			if strings.TrimSpace(rest) != "" {
				return fail("text after section header %q", t)
			}
			open = []*profNode{sec}
			continue
		case '}':
			if len(open) < 2 {
				return fail("'}' without a matching '{'")
			}
			if strings.HasPrefix(t[1:], "*") {
				open[len(open)-1].final = true
			}
			open = open[:len(open)-1]
			continue
		}

		eq := strings.IndexByte(t, '=')
		if eq <= 0 {
			return fail("expected 'tag = value', got %q", t)
		}
		tag := strings.TrimRight(t[:eq], " \t")
		if strings.ContainsAny(tag, " \t") {
			return fail("tag %q contains white space", tag)
		}
		final := false
		if i := strings.IndexByte(tag, '*'); i >= 0 {
			tag, final = tag[:i], true
		}
		if tag == "" {
			return fail("empty tag in %q", t)
		}
		cur := open[len(open)-1]
		value := strings.TrimLeft(t[eq+1:], " \t")
		switch {
		case endOrComment(value):
			// "tag =" alone: the '{' follows on the next line.
			state = stateGetOBrace
			open = append(open, cur.add(&profNode{name: tag, isGroup: true, final: final}))
		case value[0] == '{':
			if !endOrComment(strings.TrimLeft(value[1:], " \t")) {
				return fail("text after '{' in %q", t)
			}
			open = append(open, cur.add(&profNode{name: tag, isGroup: true, final: final}))
		default:
			if value[0] == '"' {
				value = unquote(value[1:])
			}
			cur.add(&profNode{name: tag, value: value, final: final, file: path, line: lineNo})
		}
	}
	if err := s.Err(); err != nil {
		return &Error{Path: path, Line: lineNo, Msg: err.Error()}
	}
	if len(open) > 1 {
		return &Error{Path: path, Line: lineNo, Msg: fmt.Sprintf("end of file inside subsection %q (missing '}')", open[len(open)-1].name)}
	}
	return nil
}

func endOrComment(s string) bool { return s == "" || s[0] == '#' || s[0] == ';' }

// directive matches "name<blank>arg" at the start of a line.
func directive(line, name string) (string, bool) {
	if len(line) <= len(name) || !strings.HasPrefix(line, name) {
		return "", false
	}
	if c := line[len(name)]; c != ' ' && c != '\t' {
		return "", false
	}
	return strings.TrimSpace(line[len(name):]), true
}

// includeDir parses the files of dir that libprofile would: names made of
// letters, digits, '-' and '_', or ending in ".conf" (not starting with a
// dot), in sorted order.
func (pf *File) includeDir(dir string, depth int, stack []string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() && includable(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if err := pf.parse(filepath.Join(dir, n), depth+1, stack); err != nil {
			return err
		}
	}
	return nil
}

func includable(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	if strings.HasSuffix(name, ".conf") {
		return true
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// unquote reads a quoted value up to the closing quote; text after it is
// ignored, as in MIT.
func unquote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			break
		}
		if c == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				c = '\n'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			default:
				c = s[i]
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Profile is an ordered list of parsed files: the KDC's view is kdc.conf
// first, then krb5.conf. A lookup returns the first value in file order,
// and a node marked final stops the search from reaching later files.
type Profile struct {
	Files []*File
	// KDCFiles: Files[:KDCFiles] are kdc.conf files, the rest krb5.conf.
	KDCFiles int
}

// Load reads a profile as the KDC does: the files of kdcPaths, then those
// of krb5Paths, skipping missing ones as libprofile does. seen, if not
// nil, is called with every file read, includes too, so that a caller can
// notice a change.
func Load(kdcPaths, krb5Paths []string, seen func(path string)) (*Profile, error) {
	p := &Profile{}
	read := func(paths []string) error {
		for _, path := range paths {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				continue
			}
			f, err := ParseFile(path)
			if err != nil {
				return err
			}
			if seen != nil {
				for _, inc := range f.Files {
					seen(inc)
				}
			}
			p.Files = append(p.Files, f)
		}
		return nil
	}
	if err := read(kdcPaths); err != nil {
		return nil, err
	}
	p.KDCFiles = len(p.Files)
	if err := read(krb5Paths); err != nil {
		return nil, err
	}
	return p, nil
}

// Get returns the first value of the relation at path (section,
// subsection..., tag).
func (p *Profile) Get(path ...string) (string, bool) {
	for _, f := range p.Files {
		v, found, final := lookup(f.root, path)
		if found {
			return v, true
		}
		if final {
			return "", false
		}
	}
	return "", false
}

// Relation is one "tag = value" and where it was read.
type Relation struct {
	Value string
	File  string
	Line  int
}

func (r Relation) String() string { return fmt.Sprintf("%s (%s:%d)", r.Value, r.File, r.Line) }

// Values returns every relation at path, in file order, as libprofile's
// profile_get_values does (a [logging] kdc may name several targets):
// the files after one with a final node on the path are not searched.
func (p *Profile) Values(path ...string) []Relation {
	var out []Relation
	for _, f := range p.Files {
		if collect(f.root, path, &out) {
			break
		}
	}
	return out
}

// collect appends the relations at path under n; it reports a final node
// on the path.
func collect(n *profNode, path []string, out *[]Relation) (final bool) {
	for _, c := range n.children {
		if c.name != path[0] || c.isGroup != (len(path) > 1) {
			continue
		}
		if len(path) == 1 {
			*out = append(*out, Relation{Value: c.value, File: c.file, Line: c.line})
			final = final || c.final
			continue
		}
		final = collect(c, path[1:], out) || c.final || final
	}
	return final
}

// lookup searches one file; final reports a final node on the path.
func lookup(n *profNode, path []string) (value string, found, final bool) {
	for _, c := range n.children {
		if c.name != path[0] {
			continue
		}
		if len(path) == 1 {
			if !c.isGroup {
				return c.value, true, c.final
			}
			continue
		}
		if !c.isGroup {
			continue
		}
		v, ok, fin := lookup(c, path[1:])
		if ok {
			return v, true, fin
		}
		final = final || fin || c.final
	}
	return "", false, final
}

// Subsections lists the names of the subsections of a top-level section
// in the kdc.conf files, in order, without duplicates.
func (p *Profile) Subsections(section string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range p.Files[:p.KDCFiles] {
		for _, sec := range f.root.children {
			if !sec.isGroup || sec.name != section {
				continue
			}
			for _, c := range sec.children {
				if c.isGroup && !seen[c.name] {
					seen[c.name] = true
					out = append(out, c.name)
				}
			}
		}
	}
	return out
}

// KDCConfCandidates are where distributions put kdc.conf: Debian/Ubuntu
// first, then RHEL/Fedora.
var KDCConfCandidates = []string{"/etc/krb5kdc/kdc.conf", "/var/kerberos/krb5kdc/kdc.conf"}

// DefaultKrb5Conf is the krb5.conf the KDC reads after kdc.conf.
const DefaultKrb5Conf = "/etc/krb5.conf"

// DefaultKDCConf is whichever of KDCConfCandidates exists, else the first.
func DefaultKDCConf() string {
	for _, p := range KDCConfCandidates {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return KDCConfCandidates[0]
}

// SplitPaths splits a colon-separated list of files (KRB5_KDC_PROFILE,
// KRB5_CONFIG), dropping empty elements.
func SplitPaths(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ":") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
