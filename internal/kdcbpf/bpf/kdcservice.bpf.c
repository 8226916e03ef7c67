// SPDX-License-Identifier: GPL-2.0
/*
 * Per-request service time of an unmodified krb5kdc, from the kernel.
 *
 * A request of a watched krb5kdc thread is in service from the return of
 * the receive system call (read, recvfrom, recvmsg) that read it from a
 * UDP or TCP socket to the thread's next send system call (write, writev,
 * sendto, sendmsg) on a UDP or TCP socket: the reply. Its type is the
 * first byte read, the ASN.1 application tag (0x6a AS-REQ, 0x6c
 * TGS-REQ); over TCP the read of the 4-byte length prefix alone does not
 * start a request. While a request is in service the scheduler
 * tracepoints split its time into on CPU, runnable waiting for a CPU, and
 * blocked (disk, locks, sleep), and stolen: on CPU by the clock but not
 * charged to the thread by the kernel (a hypervisor's steal; interrupts
 * where IRQ time is accounted), so that on CPU is what the kernel counts
 * as the thread's run time on a virtual machine too; outside service, the
 * thread's time on CPU
 * (its event loop, the receive and send calls' own work, logging after
 * the reply, receives that found nothing) is added up per process, so
 * that the two on-CPU parts are together the thread's run time, and so is
 * its time runnable waiting for a CPU (in service and outside: with the
 * run time it is what the kernel's run time plus run delay add up to,
 * whichever of the two the kernel charged a wakeup's wait to). For UDP
 * the time from the datagram's arrival in the network stack
 * (netif_receive_skb) to the receive call
 * that dequeues it is the queue time. A request the thread began without
 * blocking since its previous reply is warm (it was already waiting, as
 * every request is at saturation): its totals are also kept apart, with
 * the time from that reply to its start less its waits for a CPU (the
 * thread's whole cycle outside service). Observations go into per-CPU
 * log-linear histograms (8 buckets per power of two: Prometheus
 * native-histogram schema 3) that user space sums at scrape time;
 * nothing is sent per request.
 *
 * The scheduler and network hooks are BTF tracepoints (tp_btf:
 * sched_switch, sched_wakeup, sched_process_fork, sched_process_exit,
 * netif_receive_skb):
 * their arguments are stable across kernels and they need no tracefs.
 * Receives and sends are seen by one of several sets of programs, which
 * the loader picks by what the kernel offers (kdcbpf.HookModes): the
 * socket tracepoints (6.3), fentry or kprobes on inet_recvmsg and
 * inet_sendmsg, the receive and send system calls' tracepoints, and
 * sys_enter/sys_exit last. The system call numbers are x86-64's.
 */
#include "kdcservice.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define REQ_AS 0
#define REQ_TGS 1
#define REQ_OTHER 2
#define NREQ 3
#define TR_UDP 0
#define TR_TCP 1
#define NTR 2

/* Histogram buckets: index b holds native bucket b + IMIN, that is the
 * observations in (2^((b+IMIN-1)/8), 2^((b+IMIN)/8)] seconds; b = 0
 * everything at or below 2^-20 s (the zero bucket), b = NB-1 everything
 * above 2^(30/8) s (about 13 s). */
#define NB 192
#define IMIN (-160)

#define ST_CPU 0
#define ST_RUNQ 1
#define ST_BLOCKED 2

#define ERR_THREADS_FULL 0
#define ERR_WORKERS_FULL 1
#define ERR_WATCHED_FULL 2 /* a forked child of a watched process left out */
/* A receive whose return the program never saw: its thread entered
 * another receive, or sent, with the first still pending. A kretprobe
 * misses returns when more calls are in progress host-wide than it has
 * instances for (its maxactive: the kernel's default is the CPUs, or
 * twice them, at least 10, where user space cannot raise it), so that any
 * process blocking that many threads in a receive would hide the KDC's
 * requests; counted in every mode, as any return missed would be. */
#define ERR_MISSED_RETURN 3
#define NERR 4

struct thread {
	u64 start; /* receive of the request in service; 0: none */
	u64 last;  /* last change of state */
	u64 cpu, runq, blocked, stolen;
	u64 lost;    /* the CPU's lost time when last read (lost_switch, lost_call) */
	u64 debt;    /* stolen time seen that exceeded the stretch it was seen in */
	u64 ubuf;    /* user buffer of the receive call in progress */
	u64 qns;     /* queue time of the datagram being read; 0: unknown */
	u8 state;    /* ST_* while in service */
	u8 req, tr;
	u8 pending; /* 1+TR_* once a socket receive began, until it returns */
	u8 slept;   /* blocked outside service since its last reply (or none yet) */
	u32 tgid;   /* for user space to drop the threads of gone processes */
	u64 sk;     /* the socket of the request in service: its reply ends it */
	u64 out;    /* on CPU outside service since; 0: off CPU or in service */
	u64 wait;   /* runnable outside service since; 0: not */
	u64 hint;   /* rq_lost_counters() when lost was last read */
	/* Counts not yet added to the process's worker: the replies' and
	 * the time outside service, added at the thread's next switch out
	 * (where it blocks or is preempted), at its exit, or once they reach
	 * PENDING_MAX or PENDING_REQUESTS: one worker lookup per stretch on
	 * CPU, not per request, where a busy KDC serves many requests a
	 * stretch (a hash lookup that misses the cache after the KDC's own
	 * work). */
	u64 p_outside, p_runq, p_stolen;
	u64 replied; /* its last reply; 0: none since its last request began */
	u64 gwait;   /* runnable waiting for a CPU since that reply */
	/* A warm request (begun without blocking since the previous reply:
	 * it was waiting, as every request is at saturation): the time from
	 * that reply to its start less its waits for a CPU, the worker's
	 * whole cycle outside service; 0: not warm. */
	u64 gap;
	u64 p_count, p_sum, p_cpu;
};

/* The most outside time a thread keeps from its process's worker, ns: a
 * KDC that receives without replying (requests it drops) and never
 * blocks still shows it within this much. */
#define PENDING_MAX 1000000ULL
/* The most replies a thread keeps from its process's worker. */
#define PENDING_REQUESTS 64

struct total {
	u64 count, sum, cpu, runq, blocked, stolen;
};

struct qtotal {
	u64 count, sum;
};

/* The warm requests' share of a struct total: count, service on CPU and
 * blocked, and the gaps before them. */
struct wtotal {
	u64 count, cpu, blocked, gap;
};

struct worker {
	u64 count, sum, cpu;
	u64 outside; /* on CPU outside service */
	u64 runq;    /* runnable waiting for a CPU, in service and outside */
	u64 stolen;  /* on CPU by the clock, not charged to it: in service and outside */
};

/* The watched krb5kdc processes (tgid), filled from user space (at most
 * half of it: kdcbpf.MaxWatched) and by sched_fork; an exiting process
 * leaves it (sched_exit). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u32);
} watched SEC(".maps");

/* The state of each thread of a watched process that received from a
 * socket, by tid; removed when the thread exits (sched_exit) or its
 * process is no longer watched (user space). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, struct thread);
} threads SEC(".maps");

/* Everything counted, per CPU, in one value: user space reads it with one
 * lookup per scrape and sums the CPUs. */
struct stats {
	u64 service[NREQ * NTR * NB]; /* [req][tr][bucket] */
	struct total totals[NREQ * NTR];
	struct wtotal warm[NREQ * NTR];
	u64 queue[NTR * NB];
	struct qtotal qtotals[NTR];
	u64 errors[NERR];
	/* The last request a reply's packet ended on this CPU (dev_queue):
	 * its thread and socket, until that send's sock_send_length. */
	u64 replied_sk;
	u32 replied_tid;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct stats);
} stats SEC(".maps");

/* Per process (tgid): requests, service and on-CPU time. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, struct worker);
} workers SEC(".maps");

static __always_inline struct stats *cpu_stats(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&stats, &zero);
}

static __always_inline void count_error(u32 reason);

/* The totals of process tgid, made on first use. */
static __always_inline struct worker *worker_of(u32 tgid)
{
	struct worker *w = bpf_map_lookup_elem(&workers, &tgid);
	if (w)
		return w;
	struct worker zero = {};
	if (bpf_map_update_elem(&workers, &tgid, &zero, BPF_NOEXIST) != 0 &&
	    !bpf_map_lookup_elem(&workers, &tgid)) {
		count_error(ERR_WORKERS_FULL);
		return 0;
	}
	return bpf_map_lookup_elem(&workers, &tgid);
}

/* The calling task, read through BPF_CORE_READ: bpf_get_current_task,
 * not its _btf form, which Linux 5.8-5.10 (the system call hooks'
 * kernels) lack. */
#define current_task() ((struct task_struct *)bpf_get_current_task())

/* Kernel memory is read two ways. A BTF pointer (a tp_btf or trampoline
 * program's argument, bpf_get_current_task_btf, and what they point to)
 * is loaded from directly: an instruction, where bpf_probe_read_kernel,
 * which BPF_CORE_READ calls, is a helper call for each field (on a CPU
 * with return-thunk mitigations, tens of ns each). The functions that
 * take a bool btf read with direct loads when it is true; the callers
 * pass a constant, so that each program keeps only one of the two. */

/* p's run queue: that of its CPU. 0 where the kernel has no group
 * scheduling (no se.cfs_rq): then no time is counted as stolen. */
static __always_inline struct rq *rq_of(struct task_struct *p, bool btf)
{
	if (!bpf_core_field_exists(p->se.cfs_rq))
		return 0;
	if (btf)
		return p->se.cfs_rq->rq;
	return BPF_CORE_READ(p, se.cfs_rq, rq);
}

/* Whether a hook that reads BTF pointers (btf) also has the calling task
 * as one: bpf_get_current_task_btf is Linux 5.11's, and Debian 11's 5.10
 * runs the fentry and kprobe hooks without it. */
#define TASK_BTF(btf) ((btf) && bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf))

/* The calling task's run queue; btf as TASK_BTF says. */
static __always_inline struct rq *current_rq(bool btf)
{
	if (btf)
		return rq_of(bpf_get_current_task_btf(), true);
	return rq_of(current_task(), false);
}

/* A field of *rq, loaded once (volatile: in the order written). */
#define RQ_FIELD(rq, f, btf) ((btf) ? *(volatile u64 *)&(rq)->f : BPF_CORE_READ(rq, f))

/* The time rq's CPU charged to no task since boot, as of its last clock
 * update: rq->clock less rq->clock_task. It changes only where the
 * scheduler updates the clock (every switch, tick and wakeup on that
 * CPU), so that over a whole stretch on CPU it is exact and at a system
 * call within one off by at most a tick's steal. clock_task is read
 * first: an update (clock, then clock_task) between the two reads can
 * then only make it more, never less. */
static __always_inline u64 rq_lost(struct rq *rq, bool btf)
{
	if (!rq)
		return 0;
	u64 task = RQ_FIELD(rq, clock_task, btf);
	u64 clock = RQ_FIELD(rq, clock, btf);
	return clock > task ? clock - task : 0;
}

/* The steal and interrupt time the scheduler took out of rq's task clock,
 * from counters each written whole: never torn, but the steal one counts
 * what the kernel did not subtract too (steal beyond the clock's own
 * advance). */
static __always_inline u64 rq_lost_counters(struct rq *rq, bool btf)
{
	if (!rq)
		return 0;
	u64 l = 0;
	if (bpf_core_field_exists(rq->prev_steal_time_rq))
		l += RQ_FIELD(rq, prev_steal_time_rq, btf);
	if (bpf_core_field_exists(rq->prev_irq_time))
		l += RQ_FIELD(rq, prev_irq_time, btf);
	return l;
}

/* lost() of t's task p (the switch's BTF pointer) at a switch, under the
 * run queue's lock: exact. */
static __always_inline u64 lost_switch(struct thread *t, struct task_struct *p)
{
	struct rq *rq = rq_of(p, true);
	t->hint = rq_lost_counters(rq, true);
	return rq_lost(rq, true);
}

/* lost() of the running thread t at a system call, without the lock:
 * another CPU's wakeup or an interrupt can update the clocks between the
 * two reads, which then read up to a tick lost that was not (3.45 ms
 * stolen where the switches said 71 us): t's lost() moves on by no more
 * than the counters did. The switch out sets it right. */
static __always_inline u64 lost_call(struct thread *t, bool btf)
{
	bool direct = TASK_BTF(btf);
	struct rq *rq = current_rq(direct);
	u64 x = rq_lost(rq, direct), h = rq_lost_counters(rq, direct);
	u64 inc = x > t->lost ? x - t->lost : 0, hinc = h > t->hint ? h - t->hint : 0;
	t->hint = h;
	return t->lost + (inc < hinc ? inc : hinc);
}

/* The part of d ns on CPU, from t's last lost() to now's l, that the
 * kernel charged to no task; t's lost() moves on to l. The clock is
 * updated late, so that a steal can show within a stretch shorter than
 * it (a request's 50 us seeing the 2 ms the host took just before): what
 * exceeds d is kept as debt and taken from the thread's next stretches
 * on CPU, so that over time on CPU is the kernel's run time exactly. */
static __always_inline u64 stolen_of(struct thread *t, u64 d, u64 l)
{
	u64 s = t->debt + (l > t->lost ? l - t->lost : 0);
	t->lost = l;
	if (s <= d) {
		t->debt = 0;
		return s;
	}
	t->debt = s - d;
	return d;
}

/* Adds t's pending time outside service to w, its process's worker. */
static __always_inline void pending_flush(struct thread *t, struct worker *w)
{
	if (t->p_outside)
		__sync_fetch_and_add(&w->outside, t->p_outside);
	if (t->p_runq)
		__sync_fetch_and_add(&w->runq, t->p_runq);
	if (t->p_stolen)
		__sync_fetch_and_add(&w->stolen, t->p_stolen);
	if (t->p_count) {
		__sync_fetch_and_add(&w->count, t->p_count);
		__sync_fetch_and_add(&w->sum, t->p_sum);
		__sync_fetch_and_add(&w->cpu, t->p_cpu);
	}
	t->p_outside = 0;
	t->p_runq = 0;
	t->p_stolen = 0;
	t->p_count = 0;
	t->p_sum = 0;
	t->p_cpu = 0;
}

/* Ends t's stretch on CPU outside service at now, if one was running,
 * and adds it and extra ns to its process's time outside service (and
 * runq to its time waiting for a CPU): at once if flush, else kept in t
 * (pending_flush). Only t's own CPU writes t's pending time (t runs, or
 * is switched there), so that it needs no atomics. */
static __always_inline void outside_done(struct thread *t, u64 now, u64 l, u64 extra, u64 runq, u64 stolen, bool flush)
{
	u64 since = t->out;
	t->out = 0;
	if (since && now > since) {
		u64 d = now - since, s = stolen_of(t, d, l);
		extra += d - s;
		stolen += s;
	}
	t->p_outside += extra;
	t->p_runq += runq;
	t->p_stolen += stolen;
	if (!flush && t->p_outside < PENDING_MAX)
		return;
	if (!t->p_outside && !t->p_runq && !t->p_stolen && !t->p_count)
		return;
	struct worker *w = worker_of(t->tgid);
	if (w)
		pending_flush(t, w);
}

/* 2^31 * 2^(k/8), k = 1..7: the sub-bucket bounds of one power of two. */
static const u64 sub_bounds[7] = {
	2341847524ULL, 2553802834ULL, 2784941536ULL, 3037000500ULL,
	3311868063ULL, 3611613037ULL, 3938502376ULL,
};

static __always_inline u32 bucket(u64 ns)
{
	if (ns > 16000000000ULL)
		ns = 16000000000ULL;
	/* v in units of 2^-30 s, so that powers of two of v are powers of
	 * two of seconds */
	u64 v = (ns << 30) / 1000000000ULL;
	if (v == 0)
		return 0;
	u32 msb = 0;
	u64 x = v;
	if (x >> 32) { x >>= 32; msb += 32; }
	if (x >> 16) { x >>= 16; msb += 16; }
	if (x >> 8) { x >>= 8; msb += 8; }
	if (x >> 4) { x >>= 4; msb += 4; }
	if (x >> 2) { x >>= 2; msb += 2; }
	if (x >> 1) { msb += 1; }
	msb &= 63;
	u64 m; /* v's mantissa in [2^31, 2^32) */
	if (msb >= 31)
		m = v >> ((msb - 31) & 63);
	else
		m = v << ((31 - msb) & 63);
	int k = 8;
	if (m == (1ULL << 31)) {
		k = 0;
	} else {
#pragma unroll
		for (int j = 6; j >= 0; j--)
			if (m <= sub_bounds[j])
				k = j + 1;
	}
	int idx = 8 * ((int)msb - 30) + k - IMIN;
	if (idx < 0)
		return 0;
	if (idx > NB - 1)
		return NB - 1;
	return idx;
}

/* The watched processes, one bit a tgid (tgid % 2^16): a test that the
 * host's other tasks fail with two loads, before any map lookup, in every
 * hook that runs for the whole host (each packet, switch, wakeup, exit,
 * socket call). A set bit says only "maybe": the watched map decides.
 * User space writes watch_bits whole at each Watch, from the pids it
 * watches; the program sets fork_bits for the children it watches
 * (sched_fork) and never clears them (a worker replaced now and then: its
 * stale bit costs its pid's later namesakes a lookup). A bit set by two
 * CPUs at once in one word can be lost (no atomic OR before Linux 5.12):
 * that child is then seen from user space's next Watch. */
u64 watch_bits[65536 / 64];
u64 fork_bits[65536 / 64];

static __always_inline bool maybe_watched(u32 tgid)
{
	u32 i = (tgid / 64) % (65536 / 64);
	return ((watch_bits[i] | fork_bits[i]) >> (tgid % 64)) & 1;
}

static __always_inline bool is_watched(u32 tgid)
{
	return maybe_watched(tgid) && bpf_map_lookup_elem(&watched, &tgid) != 0;
}

static __always_inline void count_error(u32 reason)
{
	struct stats *st = cpu_stats();
	if (st && reason < NERR)
		st->errors[reason] += 1;
}

/* The state of the calling thread (id: bpf_get_current_pid_tgid), made
 * if its process is watched. */
static __always_inline struct thread *thread_of(u64 id, bool make)
{
	if (!maybe_watched(id >> 32))
		return 0;
	u32 tid = (u32)id;
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (t || !make)
		return t;
	if (!is_watched(id >> 32))
		return 0;
	/* It runs now, outside service (once a thread: read the slow way). */
	struct rq *rq = current_rq(false);
	struct thread zero = {.tgid = id >> 32, .slept = 1, .out = bpf_ktime_get_ns(), .lost = rq_lost(rq, false), .hint = rq_lost_counters(rq, false)};
	if (bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST) != 0) {
		count_error(ERR_THREADS_FULL);
		return 0;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

#define current_thread(make) thread_of(bpf_get_current_pid_tgid(), make)

/* x86-64 system call numbers */
#define NR_read 0
#define NR_write 1
#define NR_writev 20
#define NR_sendto 44
#define NR_recvfrom 45
#define NR_sendmsg 46
#define NR_recvmsg 47

#define S_IFMT 0170000
#define S_IFSOCK 0140000
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define AF_INET 2
#define AF_INET6 10

/* The transport of socket sk (a BTF pointer if btf): TR_UDP or TR_TCP
 * for an IPv4 or IPv6 socket (its local port in *port), else -1. */
static __always_inline int sock_transport(struct sock *sk, u16 *port, bool btf)
{
	unsigned short family = btf ? sk->__sk_common.skc_family : BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != AF_INET && family != AF_INET6)
		return -1;
	*port = btf ? sk->__sk_common.skc_num : BPF_CORE_READ(sk, __sk_common.skc_num);
	unsigned short type = btf ? sk->sk_type : BPF_CORE_READ(sk, sk_type);
	if (type == SOCK_DGRAM)
		return TR_UDP;
	if (type == SOCK_STREAM)
		return TR_TCP;
	return -1;
}

/* The transport of the calling process's descriptor fd: TR_UDP or TR_TCP
 * for an IPv4 or IPv6 socket (its local port in *port), else -1 (a file,
 * a pipe, the syslog socket). */
static __always_inline int fd_transport(long fd, u16 *port, struct sock **skp)
{
	struct task_struct *task = current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	unsigned int max = BPF_CORE_READ(fdt, max_fds);
	if (fd < 0 || fd >= max)
		return -1;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) != 0 || !f)
		return -1;
	unsigned short mode = BPF_CORE_READ(f, f_inode, i_mode);
	if ((mode & S_IFMT) != S_IFSOCK)
		return -1;
	struct socket *so = BPF_CORE_READ(f, private_data);
	*skp = BPF_CORE_READ(so, sk);
	return sock_transport(*skp, port, false);
}

/* UDP ports a watched KDC reads from, for the queue time: one bit a port
 * (8 KiB, every port fits), tested for every packet the host receives
 * with a load, not a map lookup. A bit is set with a plain read and
 * write (atomic OR needs Linux 5.12): one that two CPUs set at once in
 * the same word can be lost, and is set again by the port's next
 * receive. */
u64 kdc_ports[65536 / 64];

static __always_inline bool kdc_port(u16 port)
{
	return (kdc_ports[port / 64] >> (port % 64)) & 1;
}

static __always_inline void kdc_port_add(u16 port)
{
	u64 bit = 1ULL << (port % 64);
	if (!(kdc_ports[port / 64] & bit))
		kdc_ports[port / 64] |= bit;
}

/* Arrival of the datagrams to those ports, by skb. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, u64);
	__type(value, u64);
} arrivals SEC(".maps");

static __always_inline void socket_send(struct sock *sk, bool btf, bool packet);

/* Per UDP port, the arrival of the datagram the next receive on it takes
 * (socket-tracepoint kernels, where the program sees a receive only after
 * its dequeue): set by the receive before from the head of the socket's
 * queue, or by the first arrival into an empty one. In a slot of an array
 * by port (a load, where a hash map was a lookup and a delete or update
 * every receive): the slot names its port, and a port that finds another
 * in its slot has no queue time until it takes the slot back. */
struct next_dgram {
	u64 at; /* 0: none */
	u32 port;
};

#define NEXT_SLOTS 1024
struct next_dgram next_dgram[NEXT_SLOTS];

static __always_inline struct next_dgram *next_of(u16 port)
{
	return &next_dgram[port % NEXT_SLOTS];
}

/* The head of sk's queue, as __skb_recv_udp takes them: the reader
 * queue's first, or the receive queue's when that one is empty; 0 when
 * both are. */
static __always_inline u64 queue_head(struct sock *sk, bool btf)
{
	/* (udp_sock's own fields lie beyond struct sock: the verifier lets
	 * no direct load reach them) */
	struct udp_sock *up = (struct udp_sock *)sk;
	struct sk_buff *skb = BPF_CORE_READ(up, reader_queue.next);
	if ((void *)skb == (void *)__builtin_preserve_access_index(&up->reader_queue)) {
		skb = btf ? sk->sk_receive_queue.next : BPF_CORE_READ(sk, sk_receive_queue.next);
		if ((void *)skb == (void *)__builtin_preserve_access_index(&sk->sk_receive_queue))
			return 0;
	}
	return (u64)skb;
}

/* The queue time of the datagram a receive on sk is about to dequeue:
 * the head of the socket's reader queue, or of its receive queue when
 * that one is empty (as __skb_recv_udp takes them). 0 if unknown. */
static __always_inline u64 queue_time(struct sock *sk, bool btf)
{
	u64 key = queue_head(sk, btf);
	if (!key)
		return 0;
	u64 *at = bpf_map_lookup_elem(&arrivals, &key);
	if (!at)
		return 0;
	u64 now = bpf_ktime_get_ns(), q = now > *at ? now - *at : 1;
	bpf_map_delete_elem(&arrivals, &key);
	return q;
}

/* The user buffer a receive call nr reads into, from its second
 * argument: recvmsg's first iovec. 0 for another call (readv). */
static __always_inline u64 user_buffer(long nr, u64 arg)
{
	if (nr == NR_read || nr == NR_recvfrom)
		return arg;
	if (nr != NR_recvmsg)
		return 0;
	struct user_msghdr mh = {};
	struct user_iovec iov = {};
	if (bpf_probe_read_user(&mh, sizeof(mh), (void *)arg) != 0 || mh.msg_iovlen == 0 ||
	    bpf_probe_read_user(&iov, sizeof(iov), mh.msg_iov) != 0)
		return 0;
	return (u64)iov.iov_base;
}

/* A receive of thread t on socket sk (transport tr, local port) begins,
 * into the user buffer ubuf: the request it may read. */
static __always_inline void receive_begin(struct thread *t, struct sock *sk, int tr, u16 port, u64 ubuf, bool btf)
{
	if (t->pending)
		count_error(ERR_MISSED_RETURN);
	t->ubuf = ubuf;
	t->pending = 1 + tr;
	t->sk = (u64)sk;
	t->qns = 0;
	if (tr == TR_UDP) {
		kdc_port_add(port);
		t->qns = queue_time(sk, btf);
	}
}

/* System call id of the calling thread enters with its first two
 * arguments: a receive on a socket begins, or a send on one ends the
 * request in service. */
static __always_inline void syscall_enter(long id, long fd, u64 arg)
{
	bool recv = id == NR_read || id == NR_recvfrom || id == NR_recvmsg;
	bool send = id == NR_write || id == NR_writev || id == NR_sendto || id == NR_sendmsg;
	if (!recv && !send)
		return;
	u64 pidtgid = bpf_get_current_pid_tgid();
	if (!is_watched(pidtgid >> 32))
		return;
	u16 port = 0;
	struct sock *sk = 0;
	int tr = fd_transport(fd, &port, &sk);
	if (tr < 0)
		return;
	if (send) {
		socket_send(sk, false, false);
		return;
	}
	struct thread *t = current_thread(true);
	if (t)
		receive_begin(t, sk, tr, port, user_buffer(id, arg), false);
}

/* Kernels before 6.3 without BTF trampolines or kprobes, the last
 * resort: every system call enters here, a cheap test of its number
 * first, then of the process. Costly: any sys_enter/sys_exit program
 * puts every task's system calls on the kernel's slow path and runs for
 * each. */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	syscall_enter(id, regs->di, regs->si);
	return 0;
}

/* A datagram entering the host's network stack for a port of a watched
 * KDC: its arrival. */
SEC("tp_btf/netif_receive_skb")
int BPF_PROG(netif_receive, struct sk_buff *skb)
{
	/* It runs for every packet the host receives: one read of the first
	 * 48 bytes (an IPv6 header and the UDP header, or an IPv4 header
	 * without options and the UDP header), and data loaded directly from
	 * the trusted skb. */
	unsigned char *data = skb->data;
	u8 h[48];
	if (bpf_probe_read_kernel(h, sizeof(h), data) != 0)
		return 0;
	struct udphdr u = {};
	if ((h[0] >> 4) == 4) {
		if (h[9] != 17)
			return 0;
		u32 ihl = (h[0] & 0xf) * 4;
		if (ihl == 20)
			__builtin_memcpy(&u, h + 20, sizeof(u));
		else if (bpf_probe_read_kernel(&u, sizeof(u), data + ihl) != 0)
			return 0;
	} else if ((h[0] >> 4) == 6) {
		if (h[6] != 17)
			return 0;
		__builtin_memcpy(&u, h + 40, sizeof(u));
	} else {
		return 0;
	}
	u16 port = __builtin_bswap16(u.dest);
	if (!kdc_port(port))
		return 0;
	u64 key = (u64)skb, now = bpf_ktime_get_ns();
	bpf_map_update_elem(&arrivals, &key, &now, BPF_ANY);
	struct next_dgram *n = next_of(port);
	if (n->port != port || !n->at) {
		n->at = now;
		n->port = port;
	}
	return 0;
}

/* Ends the running thread t's stretch on CPU at now (l its lost()): a
 * request left without a reply has its time on CPU counted outside
 * service. */
static __always_inline void unanswered_done(struct thread *t, u64 now, u64 l, bool flush)
{
	u64 extra = 0, stolen = 0;
	if (t->start) {
		u64 d = now - t->last, s = stolen_of(t, d, l);
		extra = t->cpu + d - s;
		stolen = t->stolen + s;
	}
	outside_done(t, now, l, extra, t->start ? t->runq : 0, stolen, flush);
}

/* t's receive returned ret; now, if not 0, is the time. */
static __always_inline void receive_done(struct thread *t, long ret, u64 now, bool btf)
{
	u8 pending = t->pending;
	u64 qns = t->qns;
	t->pending = 0;
	t->qns = 0;
	if (pending == 0 || ret <= 0)
		return;
	u8 tr = pending - 1;
	if (tr == TR_TCP && ret == 4)
		return; /* the length prefix alone: the body's read starts it */
	u8 b[5] = {};
	u32 n = ret >= 5 ? 5 : 1;
	if (t->ubuf)
		bpf_probe_read_user(b, n, (void *)t->ubuf);
	u8 tag = b[0];
	if (tr == TR_TCP && b[0] == 0 && ret >= 5)
		tag = b[4]; /* prefix and body in one read */
	u8 req = tag == 0x6a ? REQ_AS : tag == 0x6c ? REQ_TGS : REQ_OTHER;
	if (!now)
		now = bpf_ktime_get_ns();
	u64 l = lost_call(t, btf);
	unanswered_done(t, now, l, false);
	t->lost = l;
	t->gap = !t->slept && t->replied && now > t->replied + t->gwait ? now - t->replied - t->gwait : 0;
	t->replied = 0;
	t->start = now;
	t->last = now;
	t->state = ST_CPU;
	t->cpu = 0;
	t->runq = 0;
	t->blocked = 0;
	t->stolen = 0;
	t->req = req;
	t->tr = tr;
	struct stats *st;
	if (tr == TR_UDP && qns && (st = cpu_stats())) {
		st->queue[TR_UDP * NB + bucket(qns)] += 1;
		st->qtotals[TR_UDP].count += 1;
		st->qtotals[TR_UDP].sum += qns;
	}
}

/* System call id of the calling thread returns ret. */
static __always_inline void syscall_exit(long id, long ret)
{
	if (id != NR_read && id != NR_recvfrom && id != NR_recvmsg)
		return;
	struct thread *t = current_thread(false);
	if (t)
		receive_done(t, ret, 0, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	syscall_exit(regs->orig_ax, ret);
	return 0;
}

/* The user buffer of the calling thread's receive system call, from
 * the registers it saved on entering the kernel. bpf_task_pt_regs is
 * Linux 5.15's (5.11's bpf_get_current_task_btf with it); before, the
 * registers are where x86-64's task_pt_regs() finds them, at the top of
 * the task's stack (THREAD_SIZE 16 KiB: no KASAN), so that the fentry and
 * kprobe hooks load on Debian 11's 5.10 too. */
#define THREAD_SIZE 16384
static __always_inline u64 syscall_buffer(void)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)) {
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		return user_buffer(regs->orig_ax, regs->si);
	}
	struct pt_regs *regs = (struct pt_regs *)((u64)BPF_CORE_READ(current_task(), stack) + THREAD_SIZE -
						  bpf_core_type_size(struct pt_regs));
	return user_buffer(BPF_CORE_READ(regs, orig_ax), BPF_CORE_READ(regs, si));
}

/* Linux 6.3 and later: the socket layer's own tracepoints, which fire only
 * for socket receives and sends. A receive of a watched thread on an IPv4
 * or IPv6 UDP or TCP socket, after the protocol copied the data: its
 * system call's user buffer (from the task's saved registers) holds the
 * request's first bytes. */
SEC("tp_btf/sock_recv_length")
int BPF_PROG(sock_recv, struct sock *sk, int ret, int flags)
{
	if (ret <= 0)
		return 0;
	u64 id = bpf_get_current_pid_tgid();
	if (!maybe_watched(id >> 32))
		return 0;
	u16 port = 0;
	int tr = sock_transport(sk, &port, true);
	if (tr < 0)
		return 0;
	struct thread *t = thread_of(id, true);
	if (!t)
		return 0;
	/* One clock read: the end of the queue time and the request's start. */
	u64 now = bpf_ktime_get_ns();
	t->ubuf = syscall_buffer();
	t->pending = 1 + tr;
	t->sk = (u64)sk;
	if (tr == TR_UDP) {
		kdc_port_add(port);
		struct next_dgram *n = next_of(port);
		bool mine = n->port == port;
		u64 was = n->at;
		if (mine && was)
			t->qns = now > was ? now - was : 1;
		/* What the next receive takes: the head now, or the next to
		 * arrive. */
		u64 head = queue_head(sk, true);
		u64 *at = head ? bpf_map_lookup_elem(&arrivals, &head) : 0;
		if (at) {
			n->at = *at;
			n->port = port;
			bpf_map_delete_elem(&arrivals, &head);
		} else if (mine) {
			n->at = 0;
		}
	}
	receive_done(t, ret, now, true);
	return 0;
}

/* The reply's first packet handed to the device, in the sender's context
 * (before loopback delivers it to the client within the same call). */
SEC("tp_btf/net_dev_queue")
int BPF_PROG(dev_queue, struct sk_buff *skb)
{
	socket_send(skb->sk, true, true);
	return 0;
}

/* A send that queued without transmitting (TCP held by its window, a
 * datagram waiting for its neighbour's address). Most sends of a reply
 * had their packet ended the request just before, in this call and on
 * this CPU: those leave at once, without the thread's state. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(sock_send, struct sock *sk, int ret, int flags)
{
	u64 id = bpf_get_current_pid_tgid();
	if (!maybe_watched(id >> 32))
		return 0;
	struct stats *st = cpu_stats();
	if (st && st->replied_tid == (u32)id) {
		u64 replied = st->replied_sk;
		st->replied_tid = 0;
		if (replied == (u64)sk)
			return 0;
	}
	socket_send(sk, true, false);
	return 0;
}

/* Kernels before 6.3 with BTF trampolines (Debian 12's 6.1, RHEL 9's
 * 5.14): the protocol family's receive and send, inet_recvmsg and
 * inet_sendmsg (the loader attaches each program to inet6_recvmsg and
 * inet6_sendmsg too: same arguments). Every socket receive and send of
 * IPv4 and IPv6 calls them from another file than the system calls
 * (net/socket.c), so they are never inlined there, and they run for
 * socket calls only: the host's other system calls never see the
 * program. */
static __always_inline void inet_receive(struct sock *sk, bool btf)
{
	u64 id = bpf_get_current_pid_tgid();
	if (!is_watched(id >> 32))
		return;
	u16 port = 0;
	int tr = sock_transport(sk, &port, btf);
	if (tr < 0)
		return;
	struct thread *t = thread_of(id, true);
	if (t)
		receive_begin(t, sk, tr, port, syscall_buffer(), btf);
}

static __always_inline void inet_received(long ret)
{
	struct thread *t = current_thread(false);
	if (t)
		receive_done(t, ret, 0, true);
}

SEC("fentry/inet_recvmsg")
int BPF_PROG(fentry_recv, struct socket *sock)
{
	inet_receive(sock->sk, true);
	return 0;
}

SEC("fexit/inet_recvmsg")
int BPF_PROG(fexit_recv, struct socket *sock, void *msg, unsigned long size, int flags, int ret)
{
	inet_received(ret);
	return 0;
}

SEC("fentry/inet_sendmsg")
int BPF_PROG(fentry_send, struct socket *sock)
{
	socket_send(sock->sk, true, false);
	return 0;
}

/* The same functions where the kernel has kprobes but no trampolines. */
SEC("kprobe/inet_recvmsg")
int kprobe_recv(struct pt_regs *ctx)
{
	inet_receive(BPF_CORE_READ((struct socket *)ctx->di, sk), false);
	return 0;
}

SEC("kretprobe/inet_recvmsg")
int kretprobe_recv(struct pt_regs *ctx)
{
	inet_received((int)ctx->ax);
	return 0;
}

SEC("kprobe/inet_sendmsg")
int kprobe_send(struct pt_regs *ctx)
{
	socket_send(BPF_CORE_READ((struct socket *)ctx->di, sk), true, false);
	return 0;
}

/* Without trampolines or kprobes: the tracepoints of the receive and
 * send system calls alone (syscalls/sys_enter_read, ...; the loader
 * attaches these two to each), which run only for those calls. Their
 * records are the tracing ABI: the call's number, then its arguments or
 * its return value, 8 bytes each. */
struct syscall_enter_args {
	u64 common;
	int nr;
	u64 args[6];
};

struct syscall_exit_args {
	u64 common;
	int nr;
	long ret;
};

SEC("tracepoint/syscalls/sys_enter_recvmsg")
int tp_enter(struct syscall_enter_args *ctx)
{
	syscall_enter(ctx->nr, ctx->args[0], ctx->args[1]);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_recvmsg")
int tp_exit(struct syscall_exit_args *ctx)
{
	syscall_exit(ctx->nr, ctx->ret);
	return 0;
}

/* A send on sk by the calling thread: the reply, if sk is the socket the
 * request came from (not a database or LDAP connection, not syslog).
 * btf: the current task is read as a BTF pointer; packet: seen at its
 * packet (dev_queue), whose sock_send_length follows. */
static __always_inline void socket_send(struct sock *sk, bool btf, bool packet)
{
	u64 id = bpf_get_current_pid_tgid();
	struct thread *t = thread_of(id, false);
	if (!t)
		return;
	if (t->pending) {
		/* A thread sends only once its receive returned. */
		t->pending = 0;
		count_error(ERR_MISSED_RETURN);
	}
	if (t->start == 0 || t->sk != (u64)sk)
		return;
	u64 now = bpf_ktime_get_ns(), l = lost_call(t, btf);
	u64 d = now - t->last;
	if (t->state == ST_RUNQ) {
		t->runq += d;
	} else if (t->state == ST_BLOCKED) {
		t->blocked += d;
	} else {
		u64 s = stolen_of(t, d, l);
		t->cpu += d - s;
		t->stolen += s;
	}
	u64 svc = now - t->start, gap = t->gap;
	t->start = 0;
	t->out = now;
	t->lost = l;
	t->replied = now;
	t->gwait = 0;
	t->slept = 0;
	t->gap = 0;
	u32 combo = (u32)t->req * NTR + t->tr;
	if (combo >= NREQ * NTR)
		return;
	struct stats *st = cpu_stats();
	if (st) {
		u32 hi = combo * NB + bucket(svc);
		if (hi < NREQ * NTR * NB)
			st->service[hi] += 1;
		struct total *tot = &st->totals[combo];
		tot->count += 1;
		tot->sum += svc;
		tot->cpu += t->cpu;
		tot->runq += t->runq;
		tot->blocked += t->blocked;
		tot->stolen += t->stolen;
		if (gap) {
			struct wtotal *w = &st->warm[combo];
			w->count += 1;
			w->cpu += t->cpu;
			w->blocked += t->blocked;
			w->gap += gap;
		}
		if (packet) {
			st->replied_sk = (u64)sk;
			st->replied_tid = (u32)id;
		}
	}
	/* The process's totals wait in t (pending_flush). */
	t->p_runq += t->runq;
	t->p_stolen += t->stolen;
	t->p_count += 1;
	t->p_sum += svc;
	t->p_cpu += t->cpu;
	if (t->p_count < PENDING_REQUESTS)
		return;
	struct worker *w = worker_of(t->tgid);
	if (w)
		pending_flush(t, w);
}

struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

static __always_inline bool runnable(struct task_struct *p)
{
	if (bpf_core_field_exists(p->__state))
		return p->__state == 0;
	struct task_struct___old *o = (void *)p;
	return o->state == 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	/* Direct loads (the tracepoint's arguments are trusted pointers), not
	 * probe reads: this runs at every context switch of the host. */
	u32 prev_tid = prev->pid, next_tid = next->pid;
	struct thread *pt = 0, *nt = 0;
	if (maybe_watched(prev->tgid))
		pt = bpf_map_lookup_elem(&threads, &prev_tid);
	if (maybe_watched(next->tgid))
		nt = bpf_map_lookup_elem(&threads, &next_tid);
	/* (Each pointer tested alone: the verifier refuses pt || nt.) */
	/* The scheduler has just updated this CPU's clocks, and holds its
	 * lock: lost is exact. */
	u64 now = 0, l = 0;
	if (pt) {
		now = bpf_ktime_get_ns();
		l = lost_switch(pt, prev);
		if (pt->start) {
			u64 d = now - pt->last, s = stolen_of(pt, d, l);
			pt->cpu += d - s;
			pt->stolen += s;
			pt->last = now;
			pt->state = (preempt || runnable(prev)) ? ST_RUNQ : ST_BLOCKED;
		} else {
			outside_done(pt, now, l, 0, 0, 0, true);
			bool run = preempt || runnable(prev);
			pt->wait = run ? now : 0;
			pt->slept |= !run;
		}
	}
	if (!nt)
		return 0;
	if (!now)
		now = bpf_ktime_get_ns();
	nt->lost = lost_switch(nt, next);
	if (!nt->start) {
		nt->out = now;
		u64 wait = nt->wait;
		nt->wait = 0;
		if (wait && now > wait) {
			nt->p_runq += now - wait; /* added at its next reply or switch out */
			nt->gwait += now - wait;
		}
	} else {
		u64 d = now - nt->last;
		if (nt->state == ST_RUNQ)
			nt->runq += d;
		else if (nt->state == ST_BLOCKED)
			nt->blocked += d;
		else
			nt->cpu += d;
		nt->last = now;
		nt->state = ST_CPU;
	}
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	if (!maybe_watched(p->tgid))
		return 0;
	u32 tid = p->pid; /* direct, as in sched_switch */
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		return 0;
	if (!t->start) {
		/* Outside service: runnable from now, unless it runs. */
		if (!t->out && !t->wait)
			t->wait = bpf_ktime_get_ns();
		return 0;
	}
	if (t->state != ST_BLOCKED)
		return 0;
	u64 now = bpf_ktime_get_ns();
	t->blocked += now - t->last;
	t->last = now;
	t->state = ST_RUNQ;
	return 0;
}

/* A worker forked by a watched supervisor (krb5kdc -w N replacing one)
 * is watched from its first request, before user space sees it. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = parent->tgid;
	u32 cpid = child->pid, ctgid = child->tgid;
	if (cpid != ctgid || !is_watched(ptgid))
		return 0;
	u32 one = 1;
	if (bpf_map_update_elem(&watched, &ctgid, &one, BPF_ANY) != 0) {
		count_error(ERR_WATCHED_FULL);
		return 0;
	}
	u32 i = (ctgid / 64) % (65536 / 64);
	fork_bits[i] |= 1ULL << (ctgid % 64);
	return 0;
}

/* ---- Map bounds: entries leave with their thread or process ---- */

/* A task exits (every thread, on every kernel since 5.5's tp_btf): its
 * thread's state goes, after its last stretch on CPU is counted, so that
 * short-lived threads of a watched process cannot fill the thread table;
 * a process's leader takes the process out of the watched set, so that
 * its pid, reused, is not traced and a forking process's children free
 * their places. User space puts a watched process back at its next scrape
 * if it still runs (a leader that exited before its other threads). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_exit, struct task_struct *p)
{
	u32 tid = p->pid, tgid = p->tgid;
	if (!maybe_watched(tgid))
		return 0;
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (t) {
		unanswered_done(t, bpf_ktime_get_ns(), lost_call(t, false), true);
		bpf_map_delete_elem(&threads, &tid);
	}
	if (tid == tgid)
		bpf_map_delete_elem(&watched, &tgid);
	return 0;
}
