package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// The version follows git: commit count without a tag, the tag on a
// tagged commit, the tag plus count after it, .dirty with local changes.
func TestGitVersion(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	commit := func(content string) {
		t.Helper()
		os.WriteFile(filepath.Join(repo, "f"), []byte(content), 0o644)
		git("add", "f")
		git("commit", "-q", "-m", content)
	}
	want := func(re string) {
		t.Helper()
		v, err := gitVersion(repo)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile("^" + re + "$").MatchString(v) {
			t.Errorf("version %q, want %s", v, re)
		}
	}
	git("init", "-q")
	commit("one")
	commit("two")
	want(`0\.0\.0\+git2\.[0-9a-f]{12}`)
	git("tag", "v1.2.3")
	want(`1\.2\.3`)
	commit("three")
	want(`1\.2\.3\+git1\.[0-9a-f]{12}`)
	os.WriteFile(filepath.Join(repo, "f"), []byte("changed"), 0o644)
	want(`1\.2\.3\+git1\.[0-9a-f]{12}\.dirty`)
}

// Dashboards and alert rules are shipped when they exist, and only those.
func TestSharedFiles(t *testing.T) {
	repo := t.TempDir()
	if c, err := sharedFiles(repo); err != nil || len(c) != 0 {
		t.Fatalf("empty tree: %v %v", c, err)
	}
	for _, f := range []string{"dashboards/kdc.json", "dashboards/notes.txt", "alerts/krb5.yml", "alerts/runbook.md", "alerts/old.yaml"} {
		os.MkdirAll(filepath.Join(repo, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(repo, f), []byte("x"), 0o644)
	}
	c, err := sharedFiles(repo)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range c {
		got = append(got, f.Destination)
	}
	slices.Sort(got)
	want := []string{"/usr/share/krb5-exporter/alerts/krb5.yml", "/usr/share/krb5-exporter/alerts/runbook.md", "/usr/share/krb5-exporter/dashboards/kdc.json"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
