package logging

import (
	"reflect"
	"testing"
	"time"
)

// A lasting failure is one line: the first failure, a changed one and the
// recovery are logged, a repeat and a lasting success are not; keys are
// apart and a success forgets its key.
func TestChanges(t *testing.T) {
	c := NewChanges(nil)
	type step struct {
		key, outcome string
		log          bool
		prev         string
	}
	for i, s := range []step{
		{"a", "", false, ""},               // fine from the start: nothing to say
		{"a", "timeout", true, ""},         // the first failure
		{"a", "timeout", false, "timeout"}, // the same again
		{"b", "refused", true, ""},         // another key on its own
		{"a", "refused", true, "timeout"},  // a changed failure
		{"a", "refused", false, "refused"}, // repeated
		{"a", "", true, "refused"},         // the recovery, from what
		{"a", "", false, ""},               // fine again: nothing
		{"a", "refused", true, ""},         // failing again after the recovery
		{"b", "refused", false, "refused"}, // b still the same
	} {
		prev, held, ok := c.Note(s.key, s.outcome)
		if ok != s.log || prev != s.prev || held != 0 {
			t.Errorf("step %d %+v: got log %v prev %q held %d", i, s, ok, prev, held)
		}
	}
	if got, want := c.Failing(), map[string]string{"a": "refused", "b": "refused"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Failing() = %v, want %v", got, want)
	}
	c.Note("b", "")
	if got, want := c.Failing(), map[string]string{"a": "refused"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after b's recovery Failing() = %v, want %v", got, want)
	}
}

// With a Limiter a repeat is logged once per interval with the count held
// back, and a change passes the interval (config reload's lines).
func TestChangesLimited(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := NewLimiter(time.Minute)
	l.now = func() time.Time { return now }
	c := NewChanges(l)
	if _, held, ok := c.Note("r", "loaded"); !ok || held != 0 {
		t.Fatalf("first outcome: log %v held %d", ok, held)
	}
	for range 3 {
		if _, _, ok := c.Note("r", "loaded"); ok {
			t.Fatal("a repeat within the interval was logged")
		}
	}
	now = now.Add(time.Minute)
	if _, held, ok := c.Note("r", "loaded"); !ok || held != 3 {
		t.Errorf("a repeat after the interval: log %v held %d, want 3 held", ok, held)
	}
	c.Note("r", "loaded")
	if prev, held, ok := c.Note("r", "failed"); !ok || held != 1 || prev != "loaded" {
		t.Errorf("a change within the interval: log %v held %d prev %q, want logged with 1 held", ok, held, prev)
	}
	if _, _, ok := c.Note("r", "failed"); ok {
		t.Error("the change did not start the interval again")
	}
}
