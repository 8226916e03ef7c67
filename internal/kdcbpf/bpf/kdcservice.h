/* Minimal CO-RE definitions of the kernel types the program reads (no
 * vmlinux.h: Debian ships no bpftool to make one). preserve_access_index
 * has libbpf/cilium relocate each field to the running kernel's BTF. */
#ifndef KDCSERVICE_H
#define KDCSERVICE_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef int __s32;
typedef long long __s64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s64 s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

struct pt_regs {
	unsigned long di;
	unsigned long si;
	unsigned long ax;
	unsigned long orig_ax;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

/* The CPU's run queue clocks: clock_task is clock less the time the
 * kernel charged to no task (the hypervisor's steal with
 * CONFIG_PARAVIRT_TIME_ACCOUNTING, interrupts with
 * CONFIG_IRQ_TIME_ACCOUNTING), the clock of every task's run time. */
struct rq {
	u64 clock;
	u64 clock_task;
	/* The steal (CONFIG_PARAVIRT_TIME_ACCOUNTING) and interrupt
	 * (CONFIG_IRQ_TIME_ACCOUNTING) time the updates of clock_task took
	 * out, each a counter written whole. */
	u64 prev_steal_time_rq;
	u64 prev_irq_time;
} __attribute__((preserve_access_index));

struct cfs_rq {
	struct rq *rq; /* CONFIG_FAIR_GROUP_SCHED */
} __attribute__((preserve_access_index));

struct sched_entity {
	struct cfs_rq *cfs_rq; /* CONFIG_FAIR_GROUP_SCHED */
} __attribute__((preserve_access_index));

struct task_struct {
	unsigned int __state;
	int pid;
	int tgid;
	struct files_struct *files;
	struct sched_entity se;
	void *stack;
} __attribute__((preserve_access_index));

/* For bpf_core_enum_value_exists: whether the kernel has the helper. */
enum bpf_func_id {
	BPF_FUNC_get_current_task_btf = 158,
	BPF_FUNC_task_pt_regs = 175,
};

struct inode {
	unsigned short i_mode;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
	void *private_data;
} __attribute__((preserve_access_index));

struct sock_common {
	unsigned short skc_family;
	unsigned short skc_num; /* local port, host order */
} __attribute__((preserve_access_index));

struct sk_buff;

struct sk_buff_head {
	struct sk_buff *next;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	struct sk_buff_head sk_receive_queue;
	unsigned short sk_type;
} __attribute__((preserve_access_index));

/* Its struct sock first: a UDP socket's sock is its udp_sock. */
struct udp_sock {
	struct sk_buff_head reader_queue;
} __attribute__((preserve_access_index));

struct socket {
	short type;
	struct sock *sk;
} __attribute__((preserve_access_index));

struct sk_buff {
	unsigned char *data;
	struct sock *sk;
} __attribute__((preserve_access_index));

/* The network headers, as on the wire. */
struct iphdr {
	__u8 ihl_version;
	__u8 tos;
	__u16 tot_len;
	__u16 id;
	__u16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__u32 saddr, daddr;
};

struct udphdr {
	__u16 source, dest, len, check;
};

/* User memory (the syscall's arguments): the ABI, not relocated. */
struct user_iovec {
	void *iov_base;
	unsigned long iov_len;
};

struct user_msghdr {
	void *msg_name;
	int msg_namelen;
	struct user_iovec *msg_iov;
	unsigned long msg_iovlen;
};

#endif
