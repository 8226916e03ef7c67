package collector

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestKDCServiceStolenLowerBound: the stolen time the program gives the
// KDC (kept busy on its CPU, in service and outside) against the
// simplest account of it, kept by a program of the test's own (below,
// written here in BPF assembly, sharing no code with the collector's):
// at every switch of the KDC, the CPU's run queue clocks, rq->clock less
// rq->clock_task (the time the kernel charged to no task: the
// hypervisor's steal here, this kernel has no IRQ time accounting),
// summed from each switch in to the next switch out. The collector's
// program splits that time between service and outside, and carries
// what a stretch shorter than the steal it saw could not hold to the next
// one (its debt, so that a phase can see the steal an earlier phase's
// account had: +3.3 ms once): since the KDC's first request its sum must
// reach half the account's (they were equal to the nanosecond in most
// phases measured; what it still carries is less than one stretch's
// steal) and exceed it by at most 20 % + 200 µs (the steal of the first
// stretch before the request started it).
//
// Steal cannot be made on demand (the hypervisor takes it; none on bare
// metal): the KDC is kept busy for up to 10 phases of about 1 s until the
// account shows at least 20 µs; with none the test says so and skips, in
// CI too: the steal is the hypervisor's, no program the machine lacks. On
// this VM the account read 0-8 ms a phase, at least 20 µs in one of the
// first 3 phases of 6 runs in 7 while other jobs ran, and none in 5
// phases on the machine alone (a clean CI rehearsal).
// Both counts are exact whatever else runs, so it runs in the race run
// too. With the stolen time zeroed in the collector's program it fails;
// so it did when the program read rq->clock less rq->clock_task at system
// calls as it does at the switches, torn by updates between the two reads
// (3.45 ms stolen where the account had 71 µs), and when it read the
// scheduler's steal counter instead (6.18 ms against 2.10: the kernel
// subtracts no more steal than its clock advanced, the counter has all).
func TestKDCServiceStolenLowerBound(t *testing.T) {
	r := upRealm(t, 0, false)
	_, ks, reg := serviceCollector(t, r)
	pinApart(t, r)
	kdc := r.KDCPids()[0]
	account := lostAccount(t, kdc)
	conn, _ := asConn(t, r, "collector-stolen")
	defer conn.Close()
	stop := drain(conn)
	defer stop()
	const perPhase = 24000 // about 1 s of the KDC busy
	// Each request for another unknown principal (the KDC answers a
	// repeated packet from its lookaside cache): one made, its name's
	// digits rewritten in place (gokrb5 takes 0.6 ms to make one under
	// the race detector).
	template, err := realm.ASRequest(r.Realm, "collector-stolen-000000")
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(template, []byte("collector-stolen-000000")) + len("collector-stolen-")
	if at < len("collector-stolen-") {
		t.Fatal("the principal's name is not in the request")
	}
	n := 0
	fresh := func() []byte {
		n++
		b := bytes.Clone(template)
		copy(b[at:], fmt.Sprintf("%06d", n))
		return b
	}
	// The collector program's totals of the KDC and the account, read
	// with the KDC idle (off CPU: every stretch closed).
	read := func() (kdcbpf.Worker, lostTotals) {
		time.Sleep(100 * time.Millisecond)
		gather(t, reg)
		var w kdcbpf.Worker
		for _, x := range ks.snap.Workers {
			if x.PID == kdc {
				w = x
			}
		}
		return w, account.read(t)
	}
	var base lostTotals // the account before the program's first sight of the KDC
	for i := range 10 {
		pkts := make([][]byte, perPhase)
		for j := range pkts {
			pkts[j] = fresh()
		}
		if i == 0 {
			_, base = read()
			conn.Write(pkts[0]) // the collector program's state of the KDC's thread
		}
		w0, a0 := read()
		sent := 0
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && sent+32 <= perPhase; {
			for range 32 {
				conn.Write(pkts[sent])
				sent++
			}
			time.Sleep(time.Millisecond)
		}
		w1, a1 := read()
		stolen := time.Duration(w1.Stolen - w0.Stolen)
		lost := time.Duration(a1.Sum - a0.Sum)
		t.Logf("phase %d: %d requests sent; the KDC's %d stretches on CPU: %v charged to no task by the run queue's clocks; the collector's program: stolen %v, on CPU %v", i+1, sent, a1.Stretches-a0.Stretches, lost, stolen, time.Duration(w1.CPU+w1.Outside-w0.CPU-w0.Outside))
		if a1.Stretches == a0.Stretches {
			t.Fatal("the account saw the KDC on no CPU")
		}
		stolen, lost = time.Duration(w1.Stolen), time.Duration(a1.Sum-base.Sum)
		t.Logf("since the first request: stolen %v, the run queue's clocks %v", stolen, lost)
		if stolen > lost+lost/5+200*time.Microsecond {
			t.Errorf("phase %d: stolen %v since the first request, the run queue's clocks %v: want at most 20 %% + 200 µs more", i+1, stolen, lost)
		}
		if lost < 20*time.Microsecond {
			continue
		}
		if stolen < lost/2 {
			t.Errorf("phase %d: stolen %v since the first request, the run queue's clocks %v: want at least half", i+1, stolen, lost)
		}
		return
	}
	t.Skip("no phase of the busy KDC had 20 µs of steal (bare metal, or a quiet hypervisor): the lower bound of the stolen time went unchecked")
}

// lostTotals is the account's: the time charged to no task while the
// process was on CPU, ns, over how many stretches.
type lostTotals struct {
	In, Sum, Stretches uint64
}

type lostAccounter struct{ m *ebpf.Map }

func (a *lostAccounter) read(t *testing.T) lostTotals {
	t.Helper()
	var v lostTotals
	if err := a.m.Lookup(uint32(0), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// lostAccount loads and attaches (raw tracepoint sched_switch) a
// program that sums rq->clock - rq->clock_task over pid's stretches on
// CPU, at the offsets the kernel's BTF gives.
func lostAccount(t *testing.T, pid int) *lostAccounter {
	t.Helper()
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	off := func(typ, path string, names ...string) int32 {
		var s *btf.Struct
		if err := spec.TypeByName(typ, &s); err != nil {
			t.Fatal(err)
		}
		var o uint32
		for _, name := range names {
			found := false
			for _, m := range s.Members {
				if m.Name == name {
					o += m.Offset.Bytes()
					if inner, ok := btf.UnderlyingType(m.Type).(*btf.Struct); ok {
						s = inner
					}
					found = true
					break
				}
			}
			if !found {
				t.Skipf("no %s in the kernel's %s: %s", name, typ, path)
			}
		}
		return int32(o)
	}
	pidOff := off("task_struct", "pid", "pid")
	cfsOff := off("task_struct", "se.cfs_rq", "se", "cfs_rq")
	rqOff := off("cfs_rq", "rq", "rq")
	clockOff := off("rq", "clock", "clock")
	taskOff := off("rq", "clock_task", "clock_task")
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 24, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	// r6 ctx; r7 task, then rq; r8 lost; r9 the map value.
	read := func(dst int16, size int32, src asm.Register, o int32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, int32(dst)),
			asm.Mov.Imm(asm.R2, size),
			asm.Mov.Reg(asm.R3, src), asm.Add.Imm(asm.R3, o),
			asm.FnProbeReadKernel.Call(),
		}
	}
	side := func(arg int16, in bool, skip, next string) asm.Instructions {
		ins := asm.Instructions{asm.LoadMem(asm.R7, asm.R6, arg, asm.DWord).WithSymbol(skip)}
		ins = append(ins, read(-8, 4, asm.R7, pidOff)...)
		ins = append(ins, asm.LoadMem(asm.R1, asm.RFP, -8, asm.Word), asm.JNE.Imm(asm.R1, int32(pid), next))
		ins = append(ins, read(-16, 8, asm.R7, cfsOff)...)
		ins = append(ins, asm.LoadMem(asm.R7, asm.RFP, -16, asm.DWord), asm.JEq.Imm(asm.R7, 0, next))
		ins = append(ins, read(-16, 8, asm.R7, rqOff)...)
		ins = append(ins, asm.LoadMem(asm.R7, asm.RFP, -16, asm.DWord), asm.JEq.Imm(asm.R7, 0, next))
		ins = append(ins, read(-24, 8, asm.R7, clockOff)...)
		ins = append(ins, read(-32, 8, asm.R7, taskOff)...)
		ins = append(ins,
			asm.LoadMem(asm.R8, asm.RFP, -24, asm.DWord), asm.LoadMem(asm.R1, asm.RFP, -32, asm.DWord), asm.Sub.Reg(asm.R8, asm.R1),
			asm.StoreImm(asm.RFP, -36, 0, asm.Word),
			asm.LoadMapPtr(asm.R1, m.FD()), asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, -36),
			asm.FnMapLookupElem.Call(), asm.JEq.Imm(asm.R0, 0, next), asm.Mov.Reg(asm.R9, asm.R0))
		if in {
			return append(ins, asm.StoreMem(asm.R9, 0, asm.R8, asm.DWord), asm.Ja.Label(next))
		}
		return append(ins,
			asm.LoadMem(asm.R1, asm.R9, 0, asm.DWord), asm.JEq.Imm(asm.R1, 0, next),
			asm.Mov.Imm(asm.R2, 0), asm.StoreMem(asm.R9, 0, asm.R2, asm.DWord),
			asm.Sub.Reg(asm.R8, asm.R1),
			asm.LoadMem(asm.R1, asm.R9, 8, asm.DWord), asm.Add.Reg(asm.R1, asm.R8), asm.StoreMem(asm.R9, 8, asm.R1, asm.DWord),
			asm.LoadMem(asm.R1, asm.R9, 16, asm.DWord), asm.Add.Imm(asm.R1, 1), asm.StoreMem(asm.R9, 16, asm.R1, asm.DWord),
		)
	}
	// sched_switch(preempt, prev, next): prev switches out, next in.
	ins := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}
	ins = append(ins, side(8, false, "prev", "next")...)
	ins = append(ins, side(16, true, "next", "end")...)
	ins = append(ins, asm.Mov.Imm(asm.R0, 0).WithSymbol("end"), asm.Return())
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint, License: "GPL", Instructions: ins})
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			t.Fatalf("the account's program: %+v", verr)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sched_switch", Program: prog})
	if err != nil {
		t.Fatal(fmt.Errorf("attach the account: %w", err))
	}
	t.Cleanup(func() { l.Close() })
	return &lostAccounter{m: m}
}
