package loadgen

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// TestStageQueues: the oldest request waiting in a set of stages, stale
// entries (a slot with a newer request, or none) skipped, and room reused
// without losing order.
func TestStageQueues(t *testing.T) {
	slots := make([]slot, 4)
	q := newStageQueues(1)
	var seq uint64
	give := func(i int, st krb5.LoginStage) {
		seq++
		slots[i].busy, slots[i].seq, slots[i].fl.Stage = true, seq, st
		q.push(slots, st, i, seq)
	}
	give(0, krb5.StageFirst)
	give(1, krb5.StageFirst)
	give(2, krb5.StageSupport)
	give(3, krb5.StageFirst)
	if i := q.oldest(slots, krb5.StageFirst); i != 0 {
		t.Fatalf("oldest first-stage: slot %d, want 0", i)
	}
	give(0, krb5.StageTimestamp) // slot 0 moves on: its first-stage entry is stale
	if i := q.oldest(slots, krb5.StageFirst); i != 1 {
		t.Fatalf("after slot 0 moved on: slot %d, want 1", i)
	}
	if i := q.oldest(slots, krb5.StageFirst, krb5.StageSupport); i != 1 {
		t.Fatalf("first or support: slot %d, want 1", i)
	}
	slots[1].busy = false // ended
	if i := q.oldest(slots, krb5.StageFirst, krb5.StageSupport); i != 2 {
		t.Fatalf("after slot 1 ended: slot %d, want 2 (support, older than slot 3)", i)
	}
	// Many rounds through a small queue: order kept, no growth.
	for round := 0; round < 1000; round++ {
		give(round%4, krb5.StageTimestamp)
	}
	if n := len(q.live(slots, krb5.StageTimestamp)); n > 4+1 {
		t.Errorf("%d timestamp entries live, want at most one per slot", n)
	}
	if c := cap(q.q[krb5.StageTimestamp].buf); c > 64 {
		t.Errorf("queue grew to %d entries for 4 slots", c)
	}
	if i := q.oldest(slots, krb5.StageTimestamp); i != 0 {
		t.Errorf("oldest timestamp after the rounds: slot %d, want 0 (given out 996th)", i)
	}
	if i := q.oldest(slots, krb5.StageResponse); i != -1 {
		t.Errorf("empty stage: slot %d", i)
	}
}

// TestBatchedWakeups: against a real KDC the batched generator sleeps
// while half its requests in flight are answered, and takes them with
// one receive: it blocks (sleep or poll) at most once per ten requests,
// about once per 32 when the machine is quiet (a wake-up costs tens of
// µs of CPU on a virtual machine, the Kerberos work of a few requests),
// every request succeeds, and each sleep begins with every slot's
// request in flight (the KDC's queue full, not run down to half).
func TestBatchedWakeups(t *testing.T) {
	r := upRealm(t)
	for _, kind := range []string{KindAS, KindTGS} {
		cfg := realmConfig(t, r, krb5.PreauthEncTimestamp)
		const n = 3000
		var a, b syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &a)
		res, err := Batched(context.Background(), cfg, kind, 64, time.Minute, n)
		syscall.Getrusage(syscall.RUSAGE_SELF, &b)
		if err != nil {
			t.Fatal(err)
		}
		reqs, failed := count(res.Records, kind)
		if failed > 0 || reqs < n {
			t.Fatalf("%s: %d requests, %d errors: %v", kind, reqs, failed, res.ErrorTexts)
		}
		// A login is two requests.
		if kind == KindAS {
			reqs *= 2
		}
		per := float64(res.Waits) / float64(reqs)
		cpu := time.Duration(b.Utime.Nano() - a.Utime.Nano() + b.Stime.Nano() - a.Stime.Nano())
		t.Logf("%s: %d requests, %.3f generator waits per request (%.3f voluntary context switches of the whole process), %.1f µs generator CPU per request",
			kind, reqs, per, float64(b.Nvcsw-a.Nvcsw)/float64(reqs), float64(cpu.Microseconds())/float64(reqs))
		t.Logf("%s: %d datagrams sent in %d messages", kind, res.Datagrams, res.Messages)
		// Requests of one length go out as one UDP_SEGMENT message: a
		// cycle sends about 32, of two lengths at most (first and
		// timestamp AS-REQs, or TGS-REQs), the odd one alone.
		if res.Datagrams < reqs || res.Messages*4 > res.Datagrams {
			t.Errorf("%s: %d datagrams in %d messages for %d requests; want each request sent, at least 4 a message", kind, res.Datagrams, res.Messages, reqs)
		}
		if res.Waits == 0 || per > 1.0/10 {
			t.Errorf("%s: %d waits, %.3f per request, want some and at most 1/10", kind, res.Waits, per)
		}
		// The KDC's queue stays full while the generator sleeps: every
		// slot freed by the last batch of replies has its next request
		// out before the next wait.
		if res.Lowest != 64 {
			t.Errorf("%s: a batch wait began with %d requests in flight, want all 64", kind, res.Lowest)
		}
	}
}
