// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// tlsperf's socket owners: which process is at each end of every TCP connection on this
// host, from the kernel, exactly. User space (src/probes/owners.rs) attaches these
// tracepoint programs with aya and reads the `owners` ring buffer: one record per
// connection end whose process is known.
//
//   client end  sock:inet_sock_set_state CLOSE → SYN_SENT runs inside connect() (or
//               sendto(MSG_FASTOPEN)), in the connecting process: the socket is
//               remembered with that process; its addresses are complete when it leaves
//               SYN_SENT (the SYN-ACK arrived, in softirq), and the record is sent then.
//   server end  SYN_RECV → ESTABLISHED (softirq) remembers the local address by the
//               peer's; accept()/accept4() returning in the accepting process reads the
//               peer's address from the caller's buffer and sends the record. A caller
//               that passes no buffer (accept(fd, NULL, NULL)) is counted, not recorded.
//
// Rebuild with src/probes/bpf/build.sh (clang -target bpf); the object is committed.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "common.h"

#define ROLE_CLIENT 1
#define ROLE_SERVER 2

// Counters (per CPU), read by user space.
#define C_CLIENTS 0       // client records sent
#define C_SERVERS 1       // server records sent
#define C_LOST 2          // the ring buffer was full
#define C_NO_PEER 3       // accept() without a peer-address buffer
#define C_NO_LOCAL 4      // accept() of a connection whose local address was not seen
#define C_NCOUNTERS 5

// One connection end and its process.
struct owner_event {
	u32 tgid;
	u8 role;
	u8 pad;
	u16 family;
	u16 lport; // host order
	u16 rport;
	u8 laddr[16];
	u8 raddr[16];
	char comm[16];
};

// The connecting process of a socket in SYN_SENT.
struct connecting {
	u32 tgid;
	char comm[16];
};

// A passive open's local end, by its peer.
struct peer_key {
	u8 raddr[16];
	u16 rport;
	u16 family;
	u32 pad;
};

struct local_end {
	u8 laddr[16];
	u16 lport;
	u16 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 21);
} owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_NCOUNTERS);
	__type(key, u32);
	__type(value, u64);
} owner_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct connecting);
} connecting SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct peer_key);
	__type(value, struct local_end);
} passive SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, u64);
} accepting SEC(".maps");

static __always_inline void count(u32 which)
{
	u64 *v = bpf_map_lookup_elem(&owner_counters, &which);
	if (v)
		*v += 1;
}

SEC("tracepoint/sock/inet_sock_set_state")
int owner_set_state(struct set_state_args *ctx)
{
	if (ctx->protocol != 6 /* IPPROTO_TCP */)
		return 0;
	s32 old = ctx->oldstate, new = ctx->newstate;
	u64 sk = (u64)ctx->skaddr;
	if (old == TCP_CLOSE && new == TCP_SYN_SENT) {
		// In the connecting process; the source port may not be chosen yet.
		struct connecting c = {.tgid = bpf_get_current_pid_tgid() >> 32};
		bpf_get_current_comm(c.comm, sizeof(c.comm));
		bpf_map_update_elem(&connecting, &sk, &c, BPF_ANY);
		return 0;
	}
	if (old == TCP_SYN_SENT) {
		// The SYN-ACK arrived (or the attempt failed): the addresses are complete.
		struct connecting *c = bpf_map_lookup_elem(&connecting, &sk);
		if (!c)
			return 0;
		if (new == TCP_ESTABLISHED) {
			struct owner_event *e = bpf_ringbuf_reserve(&owners, sizeof(*e), 0);
			if (!e) {
				count(C_LOST);
			} else {
				__builtin_memset(e, 0, sizeof(*e));
				e->tgid = c->tgid;
				e->role = ROLE_CLIENT;
				e->family = ctx->family;
				e->lport = ctx->sport;
				e->rport = ctx->dport;
				if (ctx->family == AF_INET) {
					__builtin_memcpy(e->laddr, ctx->saddr, 4);
					__builtin_memcpy(e->raddr, ctx->daddr, 4);
				} else {
					__builtin_memcpy(e->laddr, ctx->saddr_v6, 16);
					__builtin_memcpy(e->raddr, ctx->daddr_v6, 16);
				}
				__builtin_memcpy(e->comm, c->comm, 16);
				bpf_ringbuf_submit(e, 0);
				count(C_CLIENTS);
			}
		}
		bpf_map_delete_elem(&connecting, &sk);
		return 0;
	}
	if (old == TCP_SYN_RECV && new == TCP_ESTABLISHED) {
		struct peer_key k = {.rport = ctx->dport, .family = ctx->family};
		struct local_end v = {.lport = ctx->sport};
		if (ctx->family == AF_INET) {
			__builtin_memcpy(k.raddr, ctx->daddr, 4);
			__builtin_memcpy(v.laddr, ctx->saddr, 4);
		} else {
			__builtin_memcpy(k.raddr, ctx->daddr_v6, 16);
			__builtin_memcpy(v.laddr, ctx->saddr_v6, 16);
		}
		bpf_map_update_elem(&passive, &k, &v, BPF_ANY);
	}
	return 0;
}

struct sys_enter_accept_args {
	u64 common;
	u64 nr;
	u64 fd;
	u64 upeer_sockaddr;
	u64 upeer_addrlen;
};

struct sys_exit_args {
	u64 common;
	u64 nr;
	s64 ret;
};

static __always_inline int accept_enter(struct sys_enter_accept_args *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u64 addr = ctx->upeer_sockaddr;
	bpf_map_update_elem(&accepting, &id, &addr, BPF_ANY);
	return 0;
}

static __always_inline int accept_exit(struct sys_exit_args *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u64 *addr = bpf_map_lookup_elem(&accepting, &id);
	if (!addr)
		return 0;
	u64 uaddr = *addr;
	bpf_map_delete_elem(&accepting, &id);
	if (ctx->ret < 0)
		return 0;
	struct peer_key k = {};
	int got = read_sockaddr(uaddr, &k.family, &k.rport, k.raddr);
	if (got == SOCKADDR_NOT_IP)
		return 0; // not TCP/IP (a Unix socket)
	if (got != 0) {
		count(C_NO_PEER);
		return 0;
	}
	struct local_end *l = bpf_map_lookup_elem(&passive, &k);
	if (!l) {
		count(C_NO_LOCAL);
		return 0;
	}
	struct owner_event *e = bpf_ringbuf_reserve(&owners, sizeof(*e), 0);
	if (!e) {
		count(C_LOST);
		bpf_map_delete_elem(&passive, &k);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->tgid = id >> 32;
	e->role = ROLE_SERVER;
	e->family = k.family;
	e->lport = l->lport;
	e->rport = k.rport;
	__builtin_memcpy(e->laddr, l->laddr, 16);
	__builtin_memcpy(e->raddr, k.raddr, 16);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	count(C_SERVERS);
	bpf_map_delete_elem(&passive, &k);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_accept4")
int owner_accept4_enter(struct sys_enter_accept_args *ctx) { return accept_enter(ctx); }

SEC("tracepoint/syscalls/sys_exit_accept4")
int owner_accept4_exit(struct sys_exit_args *ctx) { return accept_exit(ctx); }

SEC("tracepoint/syscalls/sys_enter_accept")
int owner_accept_enter(struct sys_enter_accept_args *ctx) { return accept_enter(ctx); }

SEC("tracepoint/syscalls/sys_exit_accept")
int owner_accept_exit(struct sys_exit_args *ctx) { return accept_exit(ctx); }

char LICENSE[] SEC("license") = "Dual MIT/GPL";
