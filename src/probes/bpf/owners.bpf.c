// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// tlsperf's socket owners: which process is at each end of every TCP connection on this
// host, and which bound each UDP socket, from the kernel, exactly. User space
// (src/probes/owners.rs) attaches these programs with aya and reads the `owners` ring
// buffer (one record per TCP connection end whose process is known) and `udp_owners`
// (one per UDP bind, and one per release of a socket whose bind was recorded).
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
//   UDP ends   cgroup/post_bind4 and post_bind6 (attached to the root cgroup v2) run
//               inside bind(), in the binding process, the local address and port
//               final: a UDP socket's bind is recorded with its socket cookie and the
//               time (bpf_ktime_get_ns); cgroup/sock_release records when a socket so
//               recorded is released. A socket the kernel bound by itself (connect()
//               or sendto() without bind(): autobind) passes no bind hook; it is
//               recorded the first time it asks for its own address
//               (cgroup/getsockname4/6, in its process: Chromium's QUIC sockets do,
//               right after connect()), once (a hash lookup per getsockname() call).
//               One that never asks is not recorded: the hook of sendto() to an
//               address (cgroup/sendmsg4/6) would see it, but runs on every such
//               send on the host, the socket locked (78 ns more per 64-byte loopback
//               sendto() here, 9%), so it is not attached. QUIC's ends are UDP
//               sockets (quinn, quic-go, aioquic and ngtcp2's examples bind theirs).
//
// Rebuild with src/probes/bpf/build.sh (clang -target bpf); the object is committed.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "common.h"

#define ROLE_CLIENT 1
#define ROLE_SERVER 2
#define ROLE_UDP_BOUND 3
#define ROLE_UDP_RELEASED 4
#define IPPROTO_UDP 17

// Counters (per CPU), read by user space.
#define C_CLIENTS 0       // client records sent
#define C_SERVERS 1       // server records sent
#define C_LOST 2          // the ring buffer was full
#define C_NO_PEER 3       // accept() without a peer-address buffer
#define C_NO_LOCAL 4      // accept() of a connection whose local address was not seen
#define C_UDP_BOUND 5     // UDP binds recorded
#define C_UDP_RELEASED 6  // releases of UDP sockets whose bind was recorded
#define C_UDP_SEEN 7      // UDP sockets bound by the kernel, recorded when first seen
#define C_NCOUNTERS 8

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

// A UDP socket bound (its address final) or released; `role` at the same offset as in
// owner_event. Release records carry the cookie and the time only.
struct udp_event {
	u32 tgid;
	u8 role;
	u8 pad;
	u16 family;
	u16 lport; // host order
	u16 pad2;
	u32 pad3;
	u64 cookie;
	u64 ns; // bpf_ktime_get_ns: CLOCK_MONOTONIC
	u8 laddr[16];
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

// UDP binds and releases: a ring of their own, so that a host binding many UDP sockets
// (a DNS resolver) never crowds TCP's ends out of `owners`.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} udp_owners SEC(".maps");

// UDP sockets whose bind was recorded, by cookie: their release is recorded too.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, u8);
} udp_bound SEC(".maps");

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

// Records a UDP socket's bind (or, `seen`, its first sight after the kernel bound it):
// its local address `laddr` (`len` bytes, read by the caller: a bind program may read
// only its own family's address field) and port.
static __always_inline int udp_bound_record(u64 cookie, u16 family, u16 port, const void *laddr,
					    u32 len, int seen)
{
	struct udp_event *e = bpf_ringbuf_reserve(&udp_owners, sizeof(*e), 0);
	if (!e) {
		count(C_LOST);
		return 1;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->tgid = bpf_get_current_pid_tgid() >> 32;
	e->role = ROLE_UDP_BOUND;
	e->family = family;
	e->lport = port;
	e->cookie = cookie;
	e->ns = bpf_ktime_get_ns();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (len == 4)
		__builtin_memcpy(e->laddr, laddr, 4);
	else
		__builtin_memcpy(e->laddr, laddr, 16);
	bpf_ringbuf_submit(e, 0);
	u8 one = 1;
	bpf_map_update_elem(&udp_bound, &cookie, &one, BPF_ANY);
	count(seen ? C_UDP_SEEN : C_UDP_BOUND);
	return 1;
}

SEC("cgroup/post_bind4")
int owner_udp_bind4(struct bpf_sock *sk)
{
	if (sk->protocol != IPPROTO_UDP || sk->src_port == 0)
		return 1;
	u32 a = sk->src_ip4;
	return udp_bound_record(bpf_get_socket_cookie(sk), AF_INET, sk->src_port, &a, 4, 0);
}

SEC("cgroup/post_bind6")
int owner_udp_bind6(struct bpf_sock *sk)
{
	if (sk->protocol != IPPROTO_UDP || sk->src_port == 0)
		return 1;
	u32 a[4] = {sk->src_ip6[0], sk->src_ip6[1], sk->src_ip6[2], sk->src_ip6[3]};
	return udp_bound_record(bpf_get_socket_cookie(sk), AF_INET6, sk->src_port, a, 16, 0);
}

// A UDP socket met in getsockname(): recorded unless its bind (or an earlier sight) was.
// Never changes what the call does (returns 1).
static __always_inline int udp_seen(struct bpf_sock_addr *ctx)
{
	if (ctx->protocol != IPPROTO_UDP)
		return 1;
	struct bpf_sock *sk = ctx->sk;
	if (!sk)
		return 1;
	u16 port = sk->src_port;
	if (port == 0)
		return 1;
	u64 cookie = bpf_get_socket_cookie(ctx);
	if (bpf_map_lookup_elem(&udp_bound, &cookie))
		return 1;
	if (sk->family == AF_INET) {
		u32 a = sk->src_ip4;
		return udp_bound_record(cookie, AF_INET, port, &a, 4, 1);
	}
	u32 a[4] = {sk->src_ip6[0], sk->src_ip6[1], sk->src_ip6[2], sk->src_ip6[3]};
	return udp_bound_record(cookie, AF_INET6, port, a, 16, 1);
}

SEC("cgroup/getsockname4")
int owner_udp_name4(struct bpf_sock_addr *ctx) { return udp_seen(ctx); }

SEC("cgroup/getsockname6")
int owner_udp_name6(struct bpf_sock_addr *ctx) { return udp_seen(ctx); }

// A socket released: recorded when its bind was (the release hook may not read its
// address; the cookie names it).
SEC("cgroup/sock_release")
int owner_udp_release(struct bpf_sock *sk)
{
	if (sk->protocol != IPPROTO_UDP)
		return 1;
	u64 cookie = bpf_get_socket_cookie(sk);
	if (!bpf_map_lookup_elem(&udp_bound, &cookie))
		return 1;
	bpf_map_delete_elem(&udp_bound, &cookie);
	struct udp_event *e = bpf_ringbuf_reserve(&udp_owners, sizeof(*e), 0);
	if (!e) {
		count(C_LOST);
		return 1;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->role = ROLE_UDP_RELEASED;
	e->cookie = cookie;
	e->ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);
	count(C_UDP_RELEASED);
	return 1;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
