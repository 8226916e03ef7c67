package realm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tiny are the options of a realm with no users, services or fillers.
func tiny(dir string) Options {
	return Options{Dir: dir, Users: -1, Services: -1, Fillers: -1, NoKadmind: true}
}

// Up refuses a directory it does not own or that is a link (issue 10
// item 4: another user keeping control of the keys written into it).
func TestUpRefusesForeignOrLinkedDirectory(t *testing.T) {
	needMIT(t)
	base := t.TempDir()
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(context.Background(), tiny(link)); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a link to an empty directory: %v", err)
	}
	writable := filepath.Join(base, "writable")
	if err := os.Mkdir(writable, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(writable, 0o777)
	if _, err := Create(context.Background(), tiny(writable)); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("a directory others can write: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the foreign-owner case needs chown")
		return
	}
	foreign := filepath.Join(base, "foreign")
	if err := os.Mkdir(foreign, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(foreign, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(context.Background(), tiny(foreign)); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("an empty directory of another user: %v", err)
	}
	if fi, _ := os.Stat(foreign); fi.Mode().Perm() != 0o700 {
		t.Errorf("the foreign directory was changed to %v", fi.Mode().Perm())
	}
}

// Down removes and signals only what --dir holds, whatever realm.json says
// (issue 10 item 3: a user who could write realm.json made root's
// `realm down` remove any directory).
func TestDownTrustsOnlyItsDirectory(t *testing.T) {
	t.Parallel()
	needMIT(t)
	ctx := context.Background()
	// B is a running realm that A's forged state must not reach.
	b, err := Up(ctx, tiny(filepath.Join(t.TempDir(), "b")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Down() })
	bPid := b.KDCPids()
	if len(bPid) != 1 {
		t.Fatalf("realm B runs KDC pids %v", bPid)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(victim, "precious"), []byte("x"), 0o600)

	dirA := filepath.Join(t.TempDir(), "a")
	a, err := Create(ctx, tiny(dirA))
	if err != nil {
		t.Fatal(err)
	}
	forge := func(change func(map[string]any)) {
		t.Helper()
		path := filepath.Join(dirA, stateFile)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		change(m)
		data, _ = json.Marshal(m)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// A recorded directory other than --dir: refused, nothing removed.
	forge(func(m map[string]any) { m["dir"] = victim })
	if _, err := Load(dirA); err == nil || !strings.Contains(err.Error(), "records the directory") {
		t.Errorf("realm.json naming another directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(victim, "precious")); err != nil {
		t.Fatalf("victim touched: %v", err)
	}

	// Paths inside realm.json are not believed: B's pid file named there,
	// and B's pid written into A's own pid file, signal nothing.
	forge(func(m map[string]any) {
		m["dir"] = dirA
		m["kdc_pid_file"] = b.KDCPidFile
		m["kdc_log"] = filepath.Join(victim, "precious")
	})
	if err := os.WriteFile(a.KDCPidFile, []byte(strconv.Itoa(bPid[0])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dirA)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.KDCPidFile != filepath.Join(dirA, "krb5kdc.pid") || loaded.KDCLog != filepath.Join(dirA, "krb5kdc.log") {
		t.Errorf("paths taken from realm.json: %s %s", loaded.KDCPidFile, loaded.KDCLog)
	}
	if pids := loaded.KDCPids(); len(pids) != 0 {
		t.Errorf("A claims B's KDC: %v", pids)
	}
	if err := loaded.Down(); err != nil {
		t.Fatal(err)
	}
	if !alive(bPid[0], "krb5kdc") {
		t.Error("A's Down killed B's KDC")
	}
	if got := b.KDCPids(); len(got) != 1 || got[0] != bPid[0] {
		t.Errorf("B's own view of its KDC: %v, want %v", got, bPid)
	}
	if _, err := os.Stat(filepath.Join(victim, "precious")); err != nil {
		t.Errorf("victim touched: %v", err)
	}
	if _, err := os.Stat(dirA); !os.IsNotExist(err) {
		t.Errorf("A's directory not removed: %v", err)
	}

	// A state file others can write is not believed.
	dirC := filepath.Join(t.TempDir(), "c")
	if _, err := Create(ctx, tiny(dirC)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dirC) })
	os.Chmod(filepath.Join(dirC, stateFile), 0o666)
	if _, err := Load(dirC); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("world-writable realm.json: %v", err)
	}
	os.Chmod(filepath.Join(dirC, stateFile), 0o600)
	if os.Geteuid() == 0 {
		os.Chown(filepath.Join(dirC, stateFile), 65534, 65534)
		if _, err := Load(dirC); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("realm.json of another user: %v", err)
		}
	}
}
