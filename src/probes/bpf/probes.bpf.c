// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// tlsperf's eBPF probes: one TLS handshake per connection, stitched in the kernel out of
// the library calls that drive it, tied to its socket and to the kernel's TCP handshake.
// User space (src/probes/) attaches these programs with aya, fills `targets`, reads the
// `events` ring buffer (one record per finished handshake) and the `hist` log2 histograms.
//
// Timestamps are bpf_ktime_get_ns() (CLOCK_MONOTONIC), each taken at the instant the
// probe fires:
//   estab_ns  sock:inet_sock_set_state to TCP_ESTABLISHED (the TCP handshake completed)
//   sock_ns   accept()/accept4() returned the descriptor (server) or connect() was called
//             (client): syscall tracepoints
//   first_ns  the first handshake call was entered (uprobe / Go function entry)
//   end_ns    the call that finished the handshake returned (uretprobe / Go RET)
//   work_ns   the sum of time spent inside handshake calls less the time inside reads
//             on the connection (OpenSSL), or the function's span less its waits for
//             the peer (Go)
//   wait_ns   Go only: from a read() on the connection that returned EAGAIN to the next
//             read() on it (the goroutine parked for the peer's next flight)
//   oncpu_ns  the part of the handshake calls' time that its thread (OpenSSL) or goroutine
//             (Go) ran on a CPU: the sum of its running intervals. One opens when a call
//             is entered (OpenSSL: call_enter; Go: the handshake function's entry), when
//             its thread is switched back in (sched:sched_switch, next_pid), and (Go)
//             when runtime.execute puts its goroutine on a thread; it closes when the
//             thread is switched out (sched:sched_switch, the current task), when (Go)
//             runtime.gopark parks the goroutine or runtime.execute puts another one on
//             its thread, and when the call returns. Blocked = work − on CPU (user space).
//   part_ns   per part of work (PART_*), the time inside its functions on the handshake's
//             thread (OpenSSL: a uprobe at a libcrypto function's entry → its uretprobe,
//             the outermost call of nested ones, while the thread is inside a handshake
//             call of that SSL) or goroutine (Go: a uprobe at the function's entry → one
//             at any of its RET instructions, R14 naming the goroutine), summed
//   trust_pre_ns  trust-store loading (PART_TRUST's functions) on the handshake's thread
//             before its first call: the loads since the thread's previous handshake
//             began, summed; sent for a client, and for a server when they began after
//             its connection was accepted (user space adds it to the trust_load part)
//
// Nothing starts until user space arms the probes (settings.state = 1), once every
// program is attached; while it drains (state 2) handshakes in progress finish but none
// begins. A record says whether its handshake was seen from its start (F_WHOLE).
//
// The connection's descriptor comes from SSL_set_fd or Go's *net.TCPConn when there is
// one; otherwise (OpenSSL driven through BIOs: HAProxy, curl, s_client; a Go listener
// that wraps its connections) from the first read or write syscall the handshake makes
// on a socket the process accepted or connected while probed.
//
// Rebuild with src/probes/bpf/build.sh (clang -target bpf); the object is committed.

#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.h"

#define EAGAIN 11

#define ROLE_UNKNOWN 0
#define ROLE_SERVER 1
#define ROLE_CLIENT 2

#define LIB_OPENSSL 1
#define LIB_GO 2

#define RESULT_OK 1
#define RESULT_ERROR 2
#define RESULT_ABANDONED 3

// Kernel histogram phases (keys of `hist`).
#define PH_ACCEPT_QUEUE 0
#define PH_UNTIL_FIRST_CALL 1
#define PH_WORK 2
#define PH_WAITING 3
#define PH_SPAN 4

// Counters (indexes of `counters`).
#define C_STARTED 0
#define C_EMITTED 1
#define C_LOST 2
#define C_TABLE_FULL 3
#define C_NCOUNTERS 4

// settings.state
#define ST_IDLE 0
#define ST_ARMED 1
#define ST_DRAINING 2

// hs_state.flags and hs_event.flags
#define F_WHOLE 1      // the handshake's start was seen with every probe in place
#define F_IO 2         // Go: a syscall on its connection was seen (no morestack re-entry after)
#define F_FD_SEEN 4    // the descriptor was found (Go: waits on it are timed)
#define F_ONCPU 8      // its on-CPU time was measured (settings.oncpu has its library)

// settings.oncpu: the libraries whose on-CPU time is measured (sched_switch attached; Go:
// runtime.execute and runtime.gopark too, in every Go program probed).
#define ONCPU_OPENSSL 1
#define ONCPU_GO 2

// The parts of work, timed inside the handshake that runs on the thread or goroutine:
// indexes of part_ns, bits of settings.parts_* and hs_event.parts.
#define PART_CALLBACK 0 // Go: crypto/tls.(*Config).getCertificate
#define PART_VERIFY 1   // chain verification: OpenSSL X509_verify_cert; Go (*x509.Certificate).Verify
#define PART_SIGN 2     // signing: OpenSSL EVP_DigestSign; Go's ecdsa, rsa, ed25519 Sign methods
#define PART_KEX 3      // key exchange: OpenSSL EVP_PKEY_generate, EVP_PKEY_derive;
                        // Go crypto/tls's ECDHE key generation and shared key
#define PART_TRUST 4    // trust-store loading: OpenSSL X509_load_cert_crl_file_ex, X509_load_cert_file_ex;
                        // Go (*x509.CertPool).AppendCertsFromPEM, x509.loadSystemRoots
#define NPARTS 5

// Go: the signing key's kind, from the signing function entered.
#define KEY_ECDSA 1
#define KEY_RSA 2
#define KEY_ED25519 3

// One finished (or abandoned) handshake. Layout shared with src/probes/event.rs.
struct hs_event {
	u64 estab_ns;
	u64 sock_ns;
	u64 first_ns;
	u64 end_ns;
	u64 work_ns;
	u64 wait_ns;
	u64 oncpu_ns;
	u64 part_ns[NPARTS];
	u64 trust_pre_ns;
	u32 tgid;
	u32 tid;
	u32 calls;
	s32 fd;
	u8 laddr[16];
	u8 raddr[16];
	u16 lport;
	u16 rport;
	u16 family;
	u8 role;
	u8 lib;
	u8 result;
	u8 flags;
	u8 parts; // the parts measured for its library (bits of PART_*)
	u8 key_kind; // Go: the signing key's kind (KEY_*), 0: not known
	u16 sig_len; // OpenSSL: the length of its last signature (EVP_DigestSign's *siglen), 0: none
	u16 group;   // Go: the key exchange's group (TLS CurveID), 0: not known
	char comm[16];
};

// A connection's socket as the kernel saw it, by (process, descriptor).
struct sock_key {
	u32 tgid;
	s32 fd;
};

struct sock_info {
	u64 estab_ns;
	u64 sock_ns;
	u8 laddr[16];
	u8 raddr[16];
	u16 lport;
	u16 rport;
	u16 family;
	u8 role;
	u8 pad;
};

// The TCP handshake's completion, by the connection's addresses (written in softirq,
// where the process is not known). A passive open is keyed with lport 0 (accept() tells
// the peer's address, not the local port); an active one with its local port.
struct estab_key {
	u8 raddr[16];
	u16 rport;
	u16 lport;
	u16 family;
	u16 pad;
};

struct estab_val {
	u64 ns;
	u8 laddr[16];
	u16 lport;
	u16 pad[3];
};

// A handshake in progress: by (process, SSL* or Go goroutine).
struct hs_key {
	u32 tgid;
	u32 pad;
	u64 obj;
};

struct hs_state {
	u64 first_ns;
	u64 last_ns;
	u64 work_ns;
	u64 wait_ns;
	u64 wait_start_ns;
	u64 oncpu_ns; // its running intervals, summed
	u32 tid;
	u32 calls;
	s32 fd;
	u8 role;
	u8 lib;
	u8 flags;
	u8 pad;
	u32 run_tid; // the thread its open running interval is on (see `running`)
	u32 pad2;
	u64 part_ns[NPARTS];
	u64 part_start[NPARTS]; // Go: inside the part's function since (0: not inside)
	u64 trust_pre_ns;       // see hs_event
	u64 trust_pre_start;    // when the first of those loads began
	u16 sig_len;
	u16 group;   // Go: the key exchange's group (its CurveID), 0: not known
	u8 key_kind; // Go: the signing key's kind (KEY_*), 0: not known
	u8 pad3[3];
};

// OpenSSL: the parts' functions a thread is inside, by thread (pid_tgid): since when (the
// outermost call) and how deep.
struct tpart {
	u64 start[NPARTS];
	u64 siglen_ptr; // EVP_DigestSign's siglen argument, when it was given a buffer
	u8 depth[NPARTS];
	u8 pad[3];
};

// Trust-store loading on a thread (OpenSSL) or goroutine (Go) outside a handshake, not yet
// taken by the next handshake there.
struct trust_pending {
	u64 ns;
	u64 start;
};

// Trust-store loading per process, in handshakes or not: the kernel's count.
struct trust_proc {
	u64 ns;
	u64 loads;
	char comm[16];
};

// OpenSSL: the SSL object's descriptor and role, from SSL_set_fd and
// SSL_set_accept_state/SSL_set_connect_state, until its handshake finishes.
struct ssl_info {
	s32 fd;
	u8 role;
	u8 pending;
	u8 pad[2];
};

// OpenSSL: the call a thread is inside (calls nest: SSL_accept calls SSL_do_handshake).
struct inflight {
	u64 ssl;
	u64 enter_ns;
	u64 read_ns;    // a read on the connection in progress: when it was entered
	u64 blocked_ns; // the time in reads on the connection during this call
	u32 depth;
	u8 driving;
	u8 pad[3];
};

struct connect_args {
	u64 addr;
	s32 fd;
	u32 pad;
	u64 ns;
};

struct hist_key {
	u32 tgid;
	u8 role;
	u8 phase;
	u8 bucket;
	u8 pad;
};

// Go: the connection a goroutine's handshake reads, by (process, descriptor).
struct gofd_val {
	u64 g;
};

struct settings {
	u32 filter;        // 1: only processes in `targets`
	u32 child_pid_off; // sched_process_fork's child_pid, from its tracefs format
	u32 state;         // ST_IDLE, ST_ARMED, ST_DRAINING
	u32 next_pid_off;  // sched_switch's next_pid, from its tracefs format
	u32 oncpu;         // ONCPU_OPENSSL | ONCPU_GO
	u32 parts_openssl; // the parts measured (bits of PART_*), OpenSSL
	u32 parts_go;      // … and Go (its function found in every Go program probed)
	u32 pair_ns;       // a probe pair's own time inside what it times (calibrated)
};

// A thread running a handshake's call (OpenSSL) or goroutine (Go), by thread id: the
// handshake, and since when it runs on a CPU (0: its thread is switched out).
struct running {
	u64 obj;
	u64 since;
	u32 tgid;
	u32 pad;
};

// A client socket between connect() and the TCP handshake's completion, by its struct
// sock: whose descriptor it is.
struct sk_owner {
	u32 tgid;
	s32 fd;
};

// An active open's completion, by its struct sock, when it came before connect()
// returned (a blocking connect).
struct sk_estab {
	u64 ns;
	u8 laddr[16];
	u16 lport;
	u16 pad[3];
};

// Go: a handshake begun on this thread whose connection is not known yet.
struct go_pending {
	u64 g;
	u32 tgid;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct settings);
} settings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_NCOUNTERS);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u8);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct hist_key);
	__type(value, u64);
} hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct estab_key);
	__type(value, struct estab_val);
} estab SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sock_key);
	__type(value, struct sock_info);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct hs_key);
	__type(value, struct hs_state);
} hs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct hs_key);
	__type(value, struct ssl_info);
} ssls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct inflight);
} inflights SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, u64);
} accept_args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct connect_args);
} connect_args SEC(".maps");

// connect() in progress on a thread → its struct sock (from the SYN_SENT transition).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, u64);
} connect_sk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct sk_owner);
} sk_owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct sk_estab);
} sk_estabs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct go_pending);
} go_pendings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sock_key);
	__type(value, struct gofd_val);
} gofds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, s32);
} read_args SEC(".maps");

// LRU: a thread that exits inside a part's function leaves its entry behind.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct tpart);
} tparts SEC(".maps");

// The calibration of a probe pair's own time: calib_enter's time by thread, and the
// times calib_return measured, in the order they came (calib_next counts them).
#define CALIB_SLOTS 1024
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, u64);
	__type(value, u64);
} calib_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CALIB_SLOTS);
	__type(key, u32);
	__type(value, u64);
} calib SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} calib_next SEC(".maps");

// By (process, thread or goroutine): pad 1 for an OpenSSL thread, 2 for a Go goroutine.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct hs_key);
	__type(value, struct trust_pending);
} trust_pendings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct trust_proc);
} trust_procs SEC(".maps");

// LRU: a thread that exits inside a handshake call leaves its entry behind.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct running);
} runnings SEC(".maps");

static __always_inline void count(u32 which)
{
	u64 *v = bpf_map_lookup_elem(&counters, &which);
	if (v)
		*v += 1;
}

// A process to probe (the --pid filter).
static __always_inline int wanted(u32 tgid)
{
	u32 zero = 0;
	struct settings *s = bpf_map_lookup_elem(&settings, &zero);
	if (!s || !s->filter)
		return 1;
	return bpf_map_lookup_elem(&targets, &tgid) != 0;
}

// Something new (a socket, an SSL object, a handshake) may begin: every probe is
// attached and the run is not draining.
static __always_inline int starting(void)
{
	u32 zero = 0;
	struct settings *s = bpf_map_lookup_elem(&settings, &zero);
	return s && s->state == ST_ARMED;
}

static __always_inline u8 log2_bucket(u64 v)
{
	u8 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline void hist_add(u32 tgid, u8 role, u8 phase, u64 ns)
{
	struct hist_key k = {.tgid = tgid, .role = role, .phase = phase, .bucket = log2_bucket(ns)};
	u64 *v = bpf_map_lookup_elem(&hist, &k);
	if (v) {
		__sync_fetch_and_add(v, 1);
	} else {
		u64 one = 1;
		if (bpf_map_update_elem(&hist, &k, &one, BPF_NOEXIST) != 0) {
			v = bpf_map_lookup_elem(&hist, &k);
			if (v)
				__sync_fetch_and_add(v, 1);
		}
	}
}

// The TCP handshake's completion for this socket, if the kernel reported it; a client
// socket's local address comes with it (connect() tells only the local port).
static __always_inline u64 established_at(struct sock_info *si, u8 laddr[16])
{
	__builtin_memcpy(laddr, si->laddr, 16);
	if (si->estab_ns)
		return si->estab_ns;
	struct estab_key k = {};
	__builtin_memcpy(k.raddr, si->raddr, 16);
	k.rport = si->rport;
	k.lport = si->lport;
	k.family = si->family;
	struct estab_val *e = bpf_map_lookup_elem(&estab, &k);
	if (!e)
		return 0;
	__builtin_memcpy(laddr, e->laddr, 16);
	return e->ns;
}

// Emits one handshake: the ring-buffer record and the kernel histograms.
static __always_inline void emit(struct hs_key *key, struct hs_state *st, u64 end_ns, u8 result)
{
	u32 tgid = key->tgid;
	struct sock_key sk = {.tgid = tgid, .fd = st->fd};
	struct sock_info *si = st->fd >= 0 ? bpf_map_lookup_elem(&socks, &sk) : 0;
	u64 estab_ns = 0, sock_ns = 0;
	u8 laddr[16] = {};
	u8 role = st->role;
	if (si) {
		estab_ns = established_at(si, laddr);
		sock_ns = si->sock_ns;
		if (!role)
			role = si->role;
	}
	u64 span = end_ns - st->first_ns;
	u64 work = st->work_ns;
	u64 wait = st->wait_ns;
	u8 flags = st->flags & (F_WHOLE | F_FD_SEEN);
	if (si)
		flags |= F_WHOLE;
	u32 zero = 0;
	struct settings *set = bpf_map_lookup_elem(&settings, &zero);
	u32 measured = st->lib == LIB_GO ? ONCPU_GO : ONCPU_OPENSSL;
	if (set && (set->oncpu & measured))
		flags |= F_ONCPU;
	// Go's waits are timed on its connection: without it, they cannot be told from work.
	int split = st->lib != LIB_GO || (flags & F_FD_SEEN);
	if (st->lib == LIB_GO) {
		work = span > wait ? span - wait : 0;
	} else {
		wait = span > work ? span - work : 0;
	}
	if (result == RESULT_OK && (flags & F_WHOLE)) {
		if (role == ROLE_SERVER && estab_ns && sock_ns >= estab_ns)
			hist_add(tgid, role, PH_ACCEPT_QUEUE, sock_ns - estab_ns);
		if (sock_ns && st->first_ns >= sock_ns)
			hist_add(tgid, role, PH_UNTIL_FIRST_CALL, st->first_ns - sock_ns);
		if (split) {
			hist_add(tgid, role, PH_WORK, work);
			hist_add(tgid, role, PH_WAITING, wait);
		}
		hist_add(tgid, role, PH_SPAN, span);
	}
	struct hs_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		count(C_LOST);
		return;
	}
	ev->estab_ns = estab_ns;
	ev->sock_ns = sock_ns;
	ev->first_ns = st->first_ns;
	ev->end_ns = end_ns;
	ev->work_ns = work;
	ev->wait_ns = wait;
	ev->oncpu_ns = st->oncpu_ns;
	for (int i = 0; i < NPARTS; i++)
		ev->part_ns[i] = st->part_ns[i];
	// Loads before the first call: a client's for the connections it makes; a server's
	// only when they began after it accepted this one (not its start-up).
	u64 pre = 0;
	if (st->trust_pre_ns &&
	    (role == ROLE_CLIENT || (sock_ns && st->trust_pre_start >= sock_ns)))
		pre = st->trust_pre_ns;
	ev->trust_pre_ns = pre;
	ev->sig_len = st->sig_len;
	ev->key_kind = st->key_kind;
	ev->group = st->group;
	u32 parts = set ? (st->lib == LIB_GO ? set->parts_go : set->parts_openssl) : 0;
	ev->parts = parts & ((1 << NPARTS) - 1);
	ev->tgid = tgid;
	ev->tid = st->tid;
	ev->calls = st->calls;
	ev->fd = st->fd;
	if (si) {
		__builtin_memcpy(ev->laddr, laddr, 16);
		__builtin_memcpy(ev->raddr, si->raddr, 16);
		ev->lport = si->lport;
		ev->rport = si->rport;
		ev->family = si->family;
	} else {
		__builtin_memset(ev->laddr, 0, 16);
		__builtin_memset(ev->raddr, 0, 16);
		ev->lport = 0;
		ev->rport = 0;
		ev->family = 0;
	}
	ev->role = role;
	ev->lib = st->lib;
	ev->result = result;
	ev->flags = flags;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	// No wake-up per record: the reader polls every 50 ms (a wake-up per handshake
	// costs the probed process more than the rest of the probe).
	bpf_ringbuf_submit(ev, BPF_RB_NO_WAKEUP);
	count(C_EMITTED);
}

// ---- trust-store loading outside handshakes ----

// A handshake begins on thread or goroutine `obj` (`kind` 1: an OpenSSL thread, 2: a Go
// goroutine): it takes the trust-store loading done there since the last one began.
static __always_inline void take_trust_pending(struct hs_state *st, u32 tgid, u64 obj, u32 kind)
{
	struct hs_key k = {.tgid = tgid, .pad = kind, .obj = obj};
	struct trust_pending *p = bpf_map_lookup_elem(&trust_pendings, &k);
	if (!p)
		return;
	st->trust_pre_ns = p->ns;
	st->trust_pre_start = p->start;
	bpf_map_delete_elem(&trust_pendings, &k);
}

// A trust-store load of `ns` that began at `start` ended: counted for its process, and,
// unless a handshake in progress on that thread or goroutine took it (`in_hs`), kept for
// the next handshake there.
static __always_inline void trust_loaded(u32 tgid, u64 obj, u32 kind, u64 start, u64 ns, int in_hs)
{
	struct trust_proc *tp = bpf_map_lookup_elem(&trust_procs, &tgid);
	if (!tp) {
		struct trust_proc fresh = {};
		bpf_get_current_comm(fresh.comm, sizeof(fresh.comm));
		bpf_map_update_elem(&trust_procs, &tgid, &fresh, BPF_NOEXIST);
		tp = bpf_map_lookup_elem(&trust_procs, &tgid);
	}
	if (tp) {
		__sync_fetch_and_add(&tp->ns, ns);
		__sync_fetch_and_add(&tp->loads, 1);
	}
	if (in_hs)
		return;
	struct hs_key k = {.tgid = tgid, .pad = kind, .obj = obj};
	struct trust_pending *p = bpf_map_lookup_elem(&trust_pendings, &k);
	if (p) {
		p->ns += ns;
		return;
	}
	struct trust_pending fresh = {.ns = ns, .start = start};
	bpf_map_update_elem(&trust_pendings, &k, &fresh, BPF_ANY);
}

// ---- on CPU: the running intervals of a handshake's thread or goroutine ----

// Closes `tid`'s running interval, if open, into its handshake's oncpu_ns (when the
// handshake still runs on that thread).
static __always_inline void run_close(u32 tid, struct running *r, u64 now)
{
	if (!r->since)
		return;
	struct hs_key k = {.tgid = r->tgid, .obj = r->obj};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (st && st->run_tid == tid && now > r->since)
		st->oncpu_ns += now - r->since;
	r->since = 0;
}

// Ends `tid`'s interval and forgets it.
static __always_inline void run_end(u32 tid, u64 now)
{
	struct running *r = bpf_map_lookup_elem(&runnings, &tid);
	if (!r)
		return;
	run_close(tid, r, now);
	bpf_map_delete_elem(&runnings, &tid);
}

// `st` (the handshake of `obj`) runs on thread `tid` from `now`.
static __always_inline void run_open(u32 tid, u32 tgid, u64 obj, struct hs_state *st, u64 now)
{
	struct running r = {.obj = obj, .since = now, .tgid = tgid};
	st->run_tid = tid;
	bpf_map_update_elem(&runnings, &tid, &r, BPF_ANY);
}

// A context switch: the current task (prev) leaves its CPU, next_pid takes it. Only
// threads with an entry in `runnings` (inside a handshake) cost more than two lookups.
SEC("tracepoint/sched/sched_switch")
int on_switch(void *ctx)
{
	u32 prev = (u32)bpf_get_current_pid_tgid();
	u64 now = 0;
	struct running *r = bpf_map_lookup_elem(&runnings, &prev);
	if (r && r->since) {
		now = bpf_ktime_get_ns();
		run_close(prev, r, now);
	}
	u32 zero = 0;
	struct settings *s = bpf_map_lookup_elem(&settings, &zero);
	u32 off = s ? s->next_pid_off : 0;
	if (off == 0 || off > 256)
		return 0;
	s32 next = 0;
	bpf_probe_read_kernel(&next, sizeof(next), (u8 *)ctx + off);
	u32 n = next;
	r = bpf_map_lookup_elem(&runnings, &n);
	if (!r || r->since)
		return 0;
	struct hs_key k = {.tgid = r->tgid, .obj = r->obj};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (!st || st->run_tid != n) {
		bpf_map_delete_elem(&runnings, &n);
		return 0;
	}
	r->since = now ? now : bpf_ktime_get_ns();
	return 0;
}

// ---- the kernel: processes, sockets and TCP ----

// A process forked by a target is a target (nginx's master → its workers).
SEC("tracepoint/sched/sched_process_fork")
int on_fork(void *ctx)
{
	u32 parent = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&targets, &parent))
		return 0;
	// Where child_pid sits depends on the kernel (comm is inline before 6.x, a
	// __data_loc after); user space reads it from the event's format.
	u32 zero = 0;
	struct settings *s = bpf_map_lookup_elem(&settings, &zero);
	u32 off = s ? s->child_pid_off : 0;
	if (off == 0 || off > 256)
		return 0;
	s32 child = 0;
	bpf_probe_read_kernel(&child, sizeof(child), (u8 *)ctx + off);
	u32 c = child;
	u8 one = 1;
	bpf_map_update_elem(&targets, &c, &one, BPF_ANY);
	return 0;
}

SEC("tracepoint/sock/inet_sock_set_state")
int on_set_state(struct set_state_args *ctx)
{
	if (ctx->protocol != 6 /* IPPROTO_TCP */)
		return 0;
	s32 old = ctx->oldstate, new = ctx->newstate;
	u64 skaddr = (u64)ctx->skaddr;
	if (old == TCP_CLOSE && new == TCP_SYN_SENT) {
		// connect() in process context. The local port is not chosen yet (it reads 0
		// here): remember the socket, whose ESTABLISHED transition will carry it.
		u64 id = bpf_get_current_pid_tgid();
		if (!bpf_map_lookup_elem(&connect_args, &id))
			return 0;
		bpf_map_update_elem(&connect_sk, &id, &skaddr, BPF_ANY);
		return 0;
	}
	if (new != TCP_ESTABLISHED || (old != TCP_SYN_RECV && old != TCP_SYN_SENT))
		return 0;
	u64 now = bpf_ktime_get_ns();
	u8 laddr[16] = {};
	if (ctx->family == AF_INET)
		__builtin_memcpy(laddr, ctx->saddr, 4);
	else
		__builtin_memcpy(laddr, ctx->saddr_v6, 16);
	if (old == TCP_SYN_SENT) {
		// A client's connection: its socket gets the local end, or, when connect()
		// has not returned yet, the completion waits for it.
		struct sk_owner *o = bpf_map_lookup_elem(&sk_owners, &skaddr);
		if (o) {
			struct sock_key sk = {.tgid = o->tgid, .fd = o->fd};
			struct sock_info *si = bpf_map_lookup_elem(&socks, &sk);
			if (si && si->role == ROLE_CLIENT && si->rport == ctx->dport) {
				si->estab_ns = now;
				si->lport = ctx->sport;
				__builtin_memcpy(si->laddr, laddr, 16);
			}
			bpf_map_delete_elem(&sk_owners, &skaddr);
		} else {
			struct sk_estab e = {.ns = now, .lport = ctx->sport};
			__builtin_memcpy(e.laddr, laddr, 16);
			bpf_map_update_elem(&sk_estabs, &skaddr, &e, BPF_ANY);
		}
		return 0;
	}
	struct estab_key k = {};
	struct estab_val v = {};
	v.ns = now;
	k.family = ctx->family;
	k.rport = ctx->dport;
	v.lport = ctx->sport;
	__builtin_memcpy(v.laddr, laddr, 16);
	if (ctx->family == AF_INET)
		__builtin_memcpy(k.raddr, ctx->daddr, 4);
	else
		__builtin_memcpy(k.raddr, ctx->daddr_v6, 16);
	bpf_map_update_elem(&estab, &k, &v, BPF_ANY);
	return 0;
}

// Every syscall is seen through the two raw_syscalls tracepoints (two attachments
// instead of one per syscall: each attachment costs the kernel a grace period to remove).
struct raw_enter_args {
	u64 common;
	s64 id;
	u64 args[6];
};

struct raw_exit_args {
	u64 common;
	s64 id;
	s64 ret;
};

// x86-64 syscall numbers.
#define NR_READ 0
#define NR_WRITE 1
#define NR_READV 19
#define NR_WRITEV 20
#define NR_CONNECT 42
#define NR_ACCEPT 43
#define NR_SENDTO 44
#define NR_RECVFROM 45
#define NR_SENDMSG 46
#define NR_RECVMSG 47
#define NR_ACCEPT4 288

static __always_inline int accept_enter(u64 uaddr)
{
	u64 id = bpf_get_current_pid_tgid();
	if (!starting() || !wanted(id >> 32))
		return 0;
	bpf_map_update_elem(&accept_args, &id, &uaddr, BPF_ANY);
	return 0;
}

static __always_inline int accept_exit(s64 ret)
{
	u64 id = bpf_get_current_pid_tgid();
	u64 *addr = bpf_map_lookup_elem(&accept_args, &id);
	if (!addr)
		return 0;
	u64 uaddr = *addr;
	bpf_map_delete_elem(&accept_args, &id);
	if (ret < 0)
		return 0;
	struct sock_key sk = {.tgid = id >> 32, .fd = (s32)ret};
	struct sock_info si = {};
	si.sock_ns = bpf_ktime_get_ns();
	si.role = ROLE_SERVER;
	if (read_sockaddr(uaddr, &si.family, &si.rport, si.raddr) == 0) {
		// The local end and the instant the TCP handshake completed, by the peer.
		struct estab_key k = {};
		__builtin_memcpy(k.raddr, si.raddr, 16);
		k.rport = si.rport;
		k.family = si.family;
		struct estab_val *e = bpf_map_lookup_elem(&estab, &k);
		if (e) {
			si.estab_ns = e->ns;
			si.lport = e->lport;
			__builtin_memcpy(si.laddr, e->laddr, 16);
			bpf_map_delete_elem(&estab, &k);
		}
	}
	bpf_map_update_elem(&socks, &sk, &si, BPF_ANY);
	return 0;
}

static __always_inline int connect_enter(s32 fd, u64 uaddr)
{
	u64 id = bpf_get_current_pid_tgid();
	if (!starting() || !wanted(id >> 32))
		return 0;
	struct connect_args a = {.addr = uaddr, .fd = fd, .ns = bpf_ktime_get_ns()};
	bpf_map_update_elem(&connect_args, &id, &a, BPF_ANY);
	return 0;
}

static __always_inline int connect_exit(s64 ret)
{
	u64 id = bpf_get_current_pid_tgid();
	struct connect_args *a = bpf_map_lookup_elem(&connect_args, &id);
	if (!a)
		return 0;
	struct connect_args args = *a;
	bpf_map_delete_elem(&connect_args, &id);
	u64 *skp = bpf_map_lookup_elem(&connect_sk, &id);
	u64 skaddr = skp ? *skp : 0;
	bpf_map_delete_elem(&connect_sk, &id);
	// 0, or EINPROGRESS from a non-blocking socket; a TCP socket (SYN sent).
	if ((ret != 0 && ret != -115) || !skaddr)
		return 0;
	struct sock_info si = {};
	if (read_sockaddr(args.addr, &si.family, &si.rport, si.raddr) != 0)
		return 0;
	si.sock_ns = args.ns;
	si.role = ROLE_CLIENT;
	struct sock_key sk = {.tgid = id >> 32, .fd = args.fd};
	struct sk_estab *e = bpf_map_lookup_elem(&sk_estabs, &skaddr);
	if (e) {
		// A blocking connect: the TCP handshake completed before it returned.
		si.estab_ns = e->ns;
		si.lport = e->lport;
		__builtin_memcpy(si.laddr, e->laddr, 16);
		bpf_map_delete_elem(&sk_estabs, &skaddr);
		bpf_map_update_elem(&socks, &sk, &si, BPF_ANY);
		return 0;
	}
	bpf_map_update_elem(&socks, &sk, &si, BPF_ANY);
	struct sk_owner o = {.tgid = sk.tgid, .fd = sk.fd};
	bpf_map_update_elem(&sk_owners, &skaddr, &o, BPF_ANY);
	return 0;
}

// ---- OpenSSL ----

SEC("uprobe")
int ssl_set_fd(struct pt_regs *ctx)
{
	u64 ssl = PT_REGS_PARM1(ctx);
	s32 fd = (s32)PT_REGS_PARM2(ctx);
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!starting() || !wanted(tgid))
		return 0;
	struct hs_key k = {.tgid = tgid, .obj = ssl};
	struct ssl_info *old = bpf_map_lookup_elem(&ssls, &k);
	struct ssl_info v = {.fd = fd, .pending = 1};
	if (old)
		v.role = old->role;
	bpf_map_update_elem(&ssls, &k, &v, BPF_ANY);
	return 0;
}

static __always_inline int set_role(u64 ssl, u8 role)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!starting() || !wanted(tgid))
		return 0;
	struct hs_key k = {.tgid = tgid, .obj = ssl};
	struct ssl_info *old = bpf_map_lookup_elem(&ssls, &k);
	if (old) {
		old->role = role;
		old->pending = 1;
		return 0;
	}
	struct ssl_info v = {.fd = -1, .role = role, .pending = 1};
	bpf_map_update_elem(&ssls, &k, &v, BPF_ANY);
	return 0;
}

SEC("uprobe")
int ssl_set_accept_state(struct pt_regs *ctx) { return set_role(PT_REGS_PARM1(ctx), ROLE_SERVER); }

SEC("uprobe")
int ssl_set_connect_state(struct pt_regs *ctx) { return set_role(PT_REGS_PARM1(ctx), ROLE_CLIENT); }

// Entry of a call that may drive the handshake. `driving`: 1 for SSL_do_handshake,
// SSL_accept and SSL_connect, which always do (and end it by returning 1); 2 for
// SSL_read_early_data, which drives it (nginx with ssl_early_data on writes the server's
// flight from it) and ends it when it accepts early data (see call_return); 3 for
// SSL_write_early_data, which drives it without ending it; 0 (4 with a length of 0) for
// SSL_read/SSL_write, which drive it only while it is pending (and end it by returning
// more than 0, or 0 for a length of 0).
static __always_inline int call_enter(u64 ssl, u8 driving, u8 role)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct inflight *in = bpf_map_lookup_elem(&inflights, &id);
	if (in) {
		if (in->ssl == ssl) {
			in->depth += 1;
			return 0;
		}
	}
	if (!wanted(tgid))
		return 0;
	struct hs_key k = {.tgid = tgid, .obj = ssl};
	struct ssl_info *info = bpf_map_lookup_elem(&ssls, &k);
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	u64 now = bpf_ktime_get_ns();
	if (!st) {
		// An SSL whose handshake already succeeded is not handshaking again (nginx
		// calls SSL_do_handshake once more when early data is on).
		if (info && !info->pending)
			return 0;
		if ((driving == 0 || driving == 4) && !info)
			return 0;
		if (!starting())
			return 0;
		struct hs_state fresh = {};
		fresh.first_ns = now;
		fresh.tid = (u32)id;
		fresh.fd = info ? info->fd : -1;
		fresh.role = info && info->role ? info->role : role;
		fresh.lib = LIB_OPENSSL;
		// Its SSL object was set up while probed: the handshake is seen from its start.
		if (info)
			fresh.flags = F_WHOLE;
		take_trust_pending(&fresh, tgid, (u32)id, 1);
		if (bpf_map_update_elem(&hs, &k, &fresh, BPF_ANY) != 0) {
			count(C_TABLE_FULL);
			return 0;
		}
		count(C_STARTED);
	}
	struct inflight f = {.ssl = ssl, .enter_ns = now, .depth = 1, .driving = driving};
	bpf_map_update_elem(&inflights, &id, &f, BPF_ANY);
	st = bpf_map_lookup_elem(&hs, &k);
	if (st)
		run_open((u32)id, tgid, ssl, st, now);
	return 0;
}

// Return of such a call: success (ret > 0 for read/write, 1 for the others) ends the
// handshake.
static __always_inline int call_return(s64 ret)
{
	u64 id = bpf_get_current_pid_tgid();
	struct inflight *in = bpf_map_lookup_elem(&inflights, &id);
	if (!in)
		return 0;
	if (in->depth > 1) {
		in->depth -= 1;
		return 0;
	}
	struct inflight f = *in;
	bpf_map_delete_elem(&inflights, &id);
	u64 now = bpf_ktime_get_ns();
	run_end((u32)id, now);
	struct hs_key k = {.tgid = id >> 32, .obj = f.ssl};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (!st)
		return 0;
	// A read on the connection inside the call (a blocking socket waits there for the
	// peer's next flight) is waiting, not work.
	u64 inside = now - f.enter_ns;
	st->work_ns += inside > f.blocked_ns ? inside - f.blocked_ns : 0;
	st->calls += 1;
	st->last_ns = now;
	// SSL_read_early_data returning 1 (SUCCESS): the server accepted the PSK and the
	// client's early data, its flight is written, and it answers from now on. Its
	// handshake is over: the client's Finished is read later, or never (nginx answers
	// the early request with SSL_write_early_data and may close before it). 2 (FINISH)
	// without that only says that no early data was accepted: the handshake goes on in
	// SSL_do_handshake. SSL_write_early_data (3) never ends it.
	int finished = f.driving == 1 ? ret == 1
		     : f.driving == 0 ? ret > 0
		     : f.driving == 4 ? ret >= 0
		     : f.driving == 2 ? ret == 1
				      : 0;
	if (!finished)
		return 0;
	struct hs_state done = *st;
	emit(&k, &done, now, RESULT_OK);
	bpf_map_delete_elem(&hs, &k);
	struct ssl_info *info = bpf_map_lookup_elem(&ssls, &k);
	if (info) {
		info->pending = 0;
	} else {
		struct ssl_info finished = {.fd = done.fd, .role = done.role, .pending = 0};
		bpf_map_update_elem(&ssls, &k, &finished, BPF_ANY);
	}
	return 0;
}

SEC("uprobe")
int ssl_do_handshake(struct pt_regs *ctx) { return call_enter(PT_REGS_PARM1(ctx), 1, ROLE_UNKNOWN); }

SEC("uprobe")
int ssl_accept(struct pt_regs *ctx) { return call_enter(PT_REGS_PARM1(ctx), 1, ROLE_SERVER); }

SEC("uprobe")
int ssl_connect(struct pt_regs *ctx) { return call_enter(PT_REGS_PARM1(ctx), 1, ROLE_CLIENT); }

SEC("uprobe")
int ssl_read_early_data(struct pt_regs *ctx) { return call_enter(PT_REGS_PARM1(ctx), 2, ROLE_UNKNOWN); }

SEC("uprobe")
int ssl_write_early_data(struct pt_regs *ctx) { return call_enter(PT_REGS_PARM1(ctx), 3, ROLE_UNKNOWN); }

SEC("uprobe")
int ssl_read_write(struct pt_regs *ctx)
{
	// Of zero bytes (openssl s_client drives its handshake with SSL_write(ssl, buf, 0)),
	// a return of 0 is success.
	u8 driving = PT_REGS_PARM3(ctx) == 0 ? 4 : 0;
	return call_enter(PT_REGS_PARM1(ctx), driving, ROLE_UNKNOWN);
}

SEC("uretprobe")
int ssl_call_return(struct pt_regs *ctx) { return call_return((s32)PT_REGS_RC(ctx)); }

// SSL_free: a handshake still in progress is over without success.
SEC("uprobe")
int ssl_free(struct pt_regs *ctx)
{
	u64 ssl = PT_REGS_PARM1(ctx);
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct hs_key k = {.tgid = tgid, .obj = ssl};
	bpf_map_delete_elem(&ssls, &k);
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (!st)
		return 0;
	struct hs_state done = *st;
	u64 end = done.last_ns ? done.last_ns : done.first_ns;
	emit(&k, &done, end, RESULT_ABANDONED);
	bpf_map_delete_elem(&hs, &k);
	return 0;
}

// ---- OpenSSL's parts of work: libcrypto functions called inside a handshake call ----

// Entry of a part's function on this thread. Timed when the thread is inside a handshake
// call (`inflights`), and trust-store loading always (per process, and for the next
// handshake on the thread). Nested calls of one part (a load calling another) count
// once, from the outermost.
static __always_inline int ossl_part_enter(struct pt_regs *ctx, int part)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 zero = 0;
	struct settings *s = bpf_map_lookup_elem(&settings, &zero);
	if (!s || s->state == ST_IDLE)
		return 0;
	struct tpart *t = bpf_map_lookup_elem(&tparts, &id);
	if (!t) {
		if (part != PART_TRUST && !bpf_map_lookup_elem(&inflights, &id))
			return 0;
		if (!wanted(id >> 32))
			return 0;
		struct tpart fresh = {};
		bpf_map_update_elem(&tparts, &id, &fresh, BPF_ANY);
		t = bpf_map_lookup_elem(&tparts, &id);
		if (!t)
			return 0;
	}
	if (t->depth[part] == 0) {
		// A call that only asks for the output's length (EVP_DigestSign and
		// EVP_PKEY_derive with a NULL output, libssl's first call of each pair) does
		// no signing or derivation: not timed, so that the part holds the operation
		// and one probe pair's own time, not two. EVP_PKEY_generate's second argument
		// is never NULL.
		if ((part == PART_SIGN || part == PART_KEX) && !PT_REGS_PARM2(ctx))
			return 0;
		t->start[part] = bpf_ktime_get_ns();
		if (part == PART_SIGN)
			t->siglen_ptr = PT_REGS_PARM3(ctx);
	}
	if (t->depth[part] < 255)
		t->depth[part] += 1;
	return 0;
}

// ... and its return (uretprobe): the outermost call's time goes to the handshake the
// thread is inside.
static __always_inline int ossl_part_return(struct pt_regs *ctx, int part)
{
	u64 id = bpf_get_current_pid_tgid();
	struct tpart *t = bpf_map_lookup_elem(&tparts, &id);
	if (!t || t->depth[part] == 0)
		return 0;
	t->depth[part] -= 1;
	if (t->depth[part] != 0)
		return 0;
	u64 now = bpf_ktime_get_ns();
	u64 start = t->start[part];
	u64 ns = now > start ? now - start : 0;
	// The probe pair's own time inside the interval (the entry probe's way back to the
	// function after its clock read, the return probe's way in before its own), as
	// calibrated at attach time, is not the function's.
	u32 zero = 0;
	struct settings *s = bpf_map_lookup_elem(&settings, &zero);
	if (s)
		ns = ns > s->pair_ns ? ns - s->pair_ns : 0;
	// Parts are disjoint: a part inside another (a store loaded inside a verification)
	// is taken out of the outer one.
	for (int i = 0; i < NPARTS; i++)
		if (i != part && t->depth[i])
			t->start[i] += ns;
	u64 siglen = 0;
	if (part == PART_SIGN && t->siglen_ptr && (s32)PT_REGS_RC(ctx) == 1)
		bpf_probe_read_user(&siglen, sizeof(siglen), (void *)t->siglen_ptr);
	u32 tgid = id >> 32;
	int in_hs = 0;
	struct inflight *in = bpf_map_lookup_elem(&inflights, &id);
	if (in) {
		struct hs_key k = {.tgid = tgid, .obj = in->ssl};
		struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
		if (st && st->lib == LIB_OPENSSL) {
			st->part_ns[part] += ns;
			if (siglen && siglen < 65536)
				st->sig_len = (u16)siglen;
			in_hs = 1;
		}
	}
	if (part == PART_TRUST)
		trust_loaded(tgid, (u32)id, 1, start, ns, in_hs);
	return 0;
}

// ---- the calibration: a probe pair on a function of tlsperf's own that does nothing ----

// Its entry (uprobe): the same kind of clock read an OpenSSL part's entry makes.
SEC("uprobe")
int calib_enter(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u64 now = bpf_ktime_get_ns();
	bpf_map_update_elem(&calib_start, &id, &now, BPF_ANY);
	return 0;
}

// Its return (uretprobe): the time since the entry's clock read, kept in the next slot.
SEC("uretprobe")
int calib_return(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u64 *start = bpf_map_lookup_elem(&calib_start, &id);
	if (!start)
		return 0;
	u64 now = bpf_ktime_get_ns();
	u64 ns = now > *start ? now - *start : 0;
	u32 zero = 0;
	u64 *next = bpf_map_lookup_elem(&calib_next, &zero);
	if (!next)
		return 0;
	u64 i = __sync_fetch_and_add(next, 1);
	if (i >= CALIB_SLOTS)
		return 0;
	u32 k = (u32)i;
	u64 *slot = bpf_map_lookup_elem(&calib, &k);
	if (slot)
		*slot = ns;
	return 0;
}

SEC("uprobe")
int ossl_verify_enter(struct pt_regs *ctx) { return ossl_part_enter(ctx, PART_VERIFY); }

SEC("uretprobe")
int ossl_verify_return(struct pt_regs *ctx) { return ossl_part_return(ctx, PART_VERIFY); }

SEC("uprobe")
int ossl_sign_enter(struct pt_regs *ctx) { return ossl_part_enter(ctx, PART_SIGN); }

SEC("uretprobe")
int ossl_sign_return(struct pt_regs *ctx) { return ossl_part_return(ctx, PART_SIGN); }

SEC("uprobe")
int ossl_kex_enter(struct pt_regs *ctx) { return ossl_part_enter(ctx, PART_KEX); }

SEC("uretprobe")
int ossl_kex_return(struct pt_regs *ctx) { return ossl_part_return(ctx, PART_KEX); }

SEC("uprobe")
int ossl_trust_enter(struct pt_regs *ctx) { return ossl_part_enter(ctx, PART_TRUST); }

SEC("uretprobe")
int ossl_trust_return(struct pt_regs *ctx) { return ossl_part_return(ctx, PART_TRUST); }

// ---- Go crypto/tls (register ABI: receiver in RAX, goroutine in R14) ----

// *tls.Conn → its net.Conn's data word → *net.TCPConn → *netFD → poll.FD.Sysfd.
static __always_inline s32 go_conn_fd(u64 conn)
{
	u64 data = 0, netfd = 0;
	s64 sysfd = -1;
	if (bpf_probe_read_user(&data, sizeof(data), (void *)(conn + 8)) != 0 || !data)
		return -1;
	if (bpf_probe_read_user(&netfd, sizeof(netfd), (void *)data) != 0 || !netfd)
		return -1;
	if (bpf_probe_read_user(&sysfd, sizeof(sysfd), (void *)(netfd + 16)) != 0)
		return -1;
	if (sysfd < 0 || sysfd > 0x7fffffff)
		return -1;
	return (s32)sysfd;
}

// How soon after a handshake function's entry a second entry on the same goroutine,
// with no I/O between, is runtime.morestack re-running the function's start (the stack
// grew), not a new handshake.
#define MORESTACK_NS 50000000ULL

static __always_inline int go_enter(struct pt_regs *ctx, u8 role)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	if (!wanted(tgid))
		return 0;
	u64 g = ctx->r14;
	struct hs_key k = {.tgid = tgid, .obj = g};
	u64 now = bpf_ktime_get_ns();
	struct hs_state *old = bpf_map_lookup_elem(&hs, &k);
	if (old && old->lib == LIB_GO && !(old->flags & F_IO) && now - old->first_ns < MORESTACK_NS)
		return 0;
	if (!starting())
		return 0;
	struct hs_state st = {};
	st.first_ns = now;
	st.tid = (u32)id;
	st.calls = 1;
	st.fd = -1;
	st.role = role;
	st.lib = LIB_GO;
	st.flags = F_WHOLE;
	take_trust_pending(&st, tgid, g, 2);
	// A bare *net.TCPConn names its descriptor; anything else (a wrapping net.Conn) reads
	// as garbage there, which no probed socket of this process matches.
	s32 fd = go_conn_fd(ctx->rax);
	struct sock_key sk = {.tgid = tgid, .fd = fd};
	if (fd >= 0 && bpf_map_lookup_elem(&socks, &sk)) {
		st.fd = fd;
		st.flags |= F_FD_SEEN;
	}
	if (bpf_map_update_elem(&hs, &k, &st, BPF_ANY) != 0) {
		count(C_TABLE_FULL);
		return 0;
	}
	count(C_STARTED);
	struct hs_state *stp = bpf_map_lookup_elem(&hs, &k);
	if (stp)
		run_open((u32)id, tgid, g, stp, now);
	if (st.fd >= 0) {
		struct gofd_val gv = {.g = g};
		bpf_map_update_elem(&gofds, &sk, &gv, BPF_ANY);
	} else {
		// The handshake's first read or write, on this thread, names it.
		struct go_pending p = {.g = g, .tgid = tgid};
		bpf_map_update_elem(&go_pendings, &id, &p, BPF_ANY);
	}
	return 0;
}

SEC("uprobe")
int go_server_enter(struct pt_regs *ctx) { return go_enter(ctx, ROLE_SERVER); }

SEC("uprobe")
int go_client_enter(struct pt_regs *ctx) { return go_enter(ctx, ROLE_CLIENT); }

// At each RET of the handshake function: the error result's type word is RAX.
SEC("uprobe")
int go_return(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct hs_key k = {.tgid = tgid, .obj = ctx->r14};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (!st)
		return 0;
	u64 now = bpf_ktime_get_ns();
	u32 tid = (u32)id;
	struct running *r = bpf_map_lookup_elem(&runnings, &tid);
	if (r && r->obj == k.obj)
		run_end(tid, now);
	struct hs_state done = *st;
	bpf_map_delete_elem(&hs, &k);
	if (done.fd >= 0) {
		struct sock_key sk = {.tgid = tgid, .fd = done.fd};
		bpf_map_delete_elem(&gofds, &sk);
	}
	struct go_pending *p = bpf_map_lookup_elem(&go_pendings, &id);
	if (p && p->g == k.obj)
		bpf_map_delete_elem(&go_pendings, &id);
	emit(&k, &done, now, ctx->rax == 0 ? RESULT_OK : RESULT_ERROR);
	return 0;
}

// Parts are disjoint: `ns` of `part` inside another part (Go's system roots, loaded at
// the first verification) is taken out of the outer one.
static __always_inline void go_outer_parts_skip(struct hs_state *st, int part, u64 ns)
{
	for (int i = 0; i < NPARTS; i++)
		if (i != part && st->part_start[i])
			st->part_start[i] += ns;
}

// A part's function entered on goroutine R14: timed when a handshake runs on it. An entry
// while inside already (runtime.morestack re-running the prologue) is the same call.
static __always_inline int go_part_enter(struct pt_regs *ctx, int part)
{
	struct hs_key k = {.tgid = bpf_get_current_pid_tgid() >> 32, .obj = ctx->r14};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (!st || st->lib != LIB_GO || st->part_start[part])
		return 0;
	st->part_start[part] = bpf_ktime_get_ns();
	return 0;
}

// ... and left, at one of its RET instructions.
static __always_inline int go_part_return(struct pt_regs *ctx, int part)
{
	struct hs_key k = {.tgid = bpf_get_current_pid_tgid() >> 32, .obj = ctx->r14};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (!st || !st->part_start[part])
		return 0;
	u64 now = bpf_ktime_get_ns();
	u64 ns = now > st->part_start[part] ? now - st->part_start[part] : 0;
	st->part_ns[part] += ns;
	st->part_start[part] = 0;
	go_outer_parts_skip(st, part, ns);
	return 0;
}

SEC("uprobe")
int go_callback_enter(struct pt_regs *ctx) { return go_part_enter(ctx, PART_CALLBACK); }

SEC("uprobe")
int go_callback_return(struct pt_regs *ctx) { return go_part_return(ctx, PART_CALLBACK); }

SEC("uprobe")
int go_verify_enter(struct pt_regs *ctx) { return go_part_enter(ctx, PART_VERIFY); }

SEC("uprobe")
int go_verify_return(struct pt_regs *ctx) { return go_part_return(ctx, PART_VERIFY); }

// A signing method entered: its key's kind, then the part.
static __always_inline int go_sign_enter(struct pt_regs *ctx, u8 kind)
{
	struct hs_key k = {.tgid = bpf_get_current_pid_tgid() >> 32, .obj = ctx->r14};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (st && st->lib == LIB_GO)
		st->key_kind = kind;
	return go_part_enter(ctx, PART_SIGN);
}

SEC("uprobe")
int go_sign_ecdsa_enter(struct pt_regs *ctx) { return go_sign_enter(ctx, KEY_ECDSA); }

SEC("uprobe")
int go_sign_rsa_enter(struct pt_regs *ctx) { return go_sign_enter(ctx, KEY_RSA); }

SEC("uprobe")
int go_sign_ed25519_enter(struct pt_regs *ctx) { return go_sign_enter(ctx, KEY_ED25519); }

SEC("uprobe")
int go_sign_return(struct pt_regs *ctx) { return go_part_return(ctx, PART_SIGN); }

// crypto/tls.generateECDHEParameters (Go 1.19) or generateECDHEKey (1.20 on): (rand
// io.Reader, curveID CurveID): the interface in RAX and RBX, the group in RCX.
SEC("uprobe")
int go_kex_keygen_enter(struct pt_regs *ctx)
{
	struct hs_key k = {.tgid = bpf_get_current_pid_tgid() >> 32, .obj = ctx->r14};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (st && st->lib == LIB_GO)
		st->group = (u16)ctx->rcx;
	return go_part_enter(ctx, PART_KEX);
}

SEC("uprobe")
int go_kex_enter(struct pt_regs *ctx) { return go_part_enter(ctx, PART_KEX); }

SEC("uprobe")
int go_kex_return(struct pt_regs *ctx) { return go_part_return(ctx, PART_KEX); }

// Go's trust-store loading, timed on goroutine R14 whether a handshake runs on it or not
// (a client builds its pool before it dials): by (process, goroutine), pad 2.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct hs_key);
	__type(value, u64);
} go_trusts SEC(".maps");

SEC("uprobe")
int go_trust_enter(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 zero = 0;
	struct settings *s = bpf_map_lookup_elem(&settings, &zero);
	if (!s || s->state == ST_IDLE || !wanted(id >> 32))
		return 0;
	struct hs_key k = {.tgid = id >> 32, .pad = 2, .obj = ctx->r14};
	// Inside already: runtime.morestack re-running the prologue, or one loader calling
	// another (loadSystemRoots → AppendCertsFromPEM).
	if (bpf_map_lookup_elem(&go_trusts, &k))
		return 0;
	u64 now = bpf_ktime_get_ns();
	bpf_map_update_elem(&go_trusts, &k, &now, BPF_ANY);
	return 0;
}

// ... left at one of its RET instructions. A nested loader's RET ends it early: the
// outer one's is then no longer timed.
SEC("uprobe")
int go_trust_return(struct pt_regs *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct hs_key k = {.tgid = tgid, .pad = 2, .obj = ctx->r14};
	u64 *startp = bpf_map_lookup_elem(&go_trusts, &k);
	if (!startp)
		return 0;
	u64 start = *startp;
	bpf_map_delete_elem(&go_trusts, &k);
	u64 now = bpf_ktime_get_ns();
	u64 ns = now > start ? now - start : 0;
	struct hs_key hk = {.tgid = tgid, .obj = ctx->r14};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &hk);
	int in_hs = st && st->lib == LIB_GO;
	if (in_hs) {
		st->part_ns[PART_TRUST] += ns;
		go_outer_parts_skip(st, PART_TRUST, ns);
	}
	trust_loaded(tgid, ctx->r14, 2, start, ns, in_hs);
	return 0;
}

// runtime.execute(gp, inheritTime): the scheduler puts goroutine gp (RAX) on this thread.
// Whatever ran here before stops running; gp runs from now if it is in a handshake.
SEC("uprobe")
int go_execute(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	u64 now = bpf_ktime_get_ns();
	run_end(tid, now);
	struct hs_key k = {.tgid = id >> 32, .obj = ctx->rax};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (st && st->lib == LIB_GO)
		run_open(tid, k.tgid, k.obj, st, now);
	return 0;
}

// runtime.gopark: the current goroutine (R14) parks; it runs again at runtime.execute.
SEC("uprobe")
int go_park(struct pt_regs *ctx)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct running *r = bpf_map_lookup_elem(&runnings, &tid);
	if (r && r->obj == ctx->r14)
		run_end(tid, bpf_ktime_get_ns());
	return 0;
}

// A read or write syscall entered on this thread: when a handshake whose descriptor is
// unknown is running here (inside an OpenSSL call, or a Go handshake that has not made
// a syscall yet), the descriptor is its connection's, provided the process accepted or
// connected that socket while probed.
static __always_inline void discover(u64 id, s32 fd)
{
	u32 tgid = id >> 32;
	struct sock_key sk = {.tgid = tgid, .fd = fd};
	struct inflight *in = bpf_map_lookup_elem(&inflights, &id);
	if (in) {
		struct hs_key k = {.tgid = tgid, .obj = in->ssl};
		struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
		if (!st || st->fd >= 0 || !bpf_map_lookup_elem(&socks, &sk))
			return;
		st->fd = fd;
		st->flags |= F_FD_SEEN;
		struct ssl_info *info = bpf_map_lookup_elem(&ssls, &k);
		if (info && info->fd < 0)
			info->fd = fd;
		return;
	}
	struct go_pending *gp = bpf_map_lookup_elem(&go_pendings, &id);
	if (!gp)
		return;
	u64 g = gp->g;
	// The goroutine's first syscall decides: its connection, or one not probed.
	bpf_map_delete_elem(&go_pendings, &id);
	if (!bpf_map_lookup_elem(&socks, &sk))
		return;
	struct hs_key k = {.tgid = tgid, .obj = g};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (!st || st->fd >= 0)
		return;
	st->fd = fd;
	st->flags |= F_FD_SEEN | F_IO;
	struct gofd_val gv = {.g = g};
	bpf_map_update_elem(&gofds, &sk, &gv, BPF_ANY);
}

// Go: a read on a connection in handshake ends a wait that an EAGAIN began.
static __always_inline int read_enter(s32 fd)
{
	u64 id = bpf_get_current_pid_tgid();
	discover(id, fd);
	struct sock_key sk = {.tgid = id >> 32, .fd = fd};
	struct gofd_val *gv = bpf_map_lookup_elem(&gofds, &sk);
	if (!gv)
		return 0;
	struct hs_key k = {.tgid = sk.tgid, .obj = gv->g};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (!st)
		return 0;
	st->flags |= F_IO;
	if (st->wait_start_ns) {
		st->wait_ns += bpf_ktime_get_ns() - st->wait_start_ns;
		st->wait_start_ns = 0;
	}
	bpf_map_update_elem(&read_args, &id, &fd, BPF_ANY);
	return 0;
}

static __always_inline int read_exit(s64 ret)
{
	u64 id = bpf_get_current_pid_tgid();
	s32 *fdp = bpf_map_lookup_elem(&read_args, &id);
	if (!fdp)
		return 0;
	struct sock_key sk = {.tgid = id >> 32, .fd = *fdp};
	bpf_map_delete_elem(&read_args, &id);
	if (ret != -EAGAIN)
		return 0;
	struct gofd_val *gv = bpf_map_lookup_elem(&gofds, &sk);
	if (!gv)
		return 0;
	struct hs_key k = {.tgid = sk.tgid, .obj = gv->g};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (st)
		st->wait_start_ns = bpf_ktime_get_ns();
	return 0;
}

// OpenSSL: a read-type syscall on the connection begins inside a handshake call.
static __always_inline void read_begin(u64 id, s32 fd)
{
	struct inflight *in = bpf_map_lookup_elem(&inflights, &id);
	if (!in)
		return;
	struct hs_key k = {.tgid = id >> 32, .obj = in->ssl};
	struct hs_state *st = bpf_map_lookup_elem(&hs, &k);
	if (st && st->fd == fd)
		in->read_ns = bpf_ktime_get_ns();
}

// ... and ends.
static __always_inline void read_end(u64 id)
{
	struct inflight *in = bpf_map_lookup_elem(&inflights, &id);
	if (in && in->read_ns) {
		in->blocked_ns += bpf_ktime_get_ns() - in->read_ns;
		in->read_ns = 0;
	}
}

SEC("tracepoint/raw_syscalls/sys_enter")
int on_sys_enter(struct raw_enter_args *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	s32 fd = (s32)ctx->args[0];
	switch ((s32)ctx->id) {
	case NR_READ:
		read_enter(fd);
		read_begin(id, fd);
		return 0;
	case NR_READV:
	case NR_RECVFROM:
	case NR_RECVMSG:
		discover(id, fd);
		read_begin(id, fd);
		return 0;
	case NR_WRITE:
	case NR_WRITEV:
	case NR_SENDTO:
	case NR_SENDMSG:
		discover(id, fd);
		return 0;
	case NR_ACCEPT:
	case NR_ACCEPT4:
		return accept_enter(ctx->args[1]);
	case NR_CONNECT:
		return connect_enter(fd, ctx->args[1]);
	}
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int on_sys_exit(struct raw_exit_args *ctx)
{
	switch ((s32)ctx->id) {
	case NR_READ:
		read_end(bpf_get_current_pid_tgid());
		return read_exit(ctx->ret);
	case NR_READV:
	case NR_RECVFROM:
	case NR_RECVMSG:
		read_end(bpf_get_current_pid_tgid());
		return 0;
	case NR_ACCEPT:
	case NR_ACCEPT4:
		return accept_exit(ctx->ret);
	case NR_CONNECT:
		return connect_exit(ctx->ret);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
