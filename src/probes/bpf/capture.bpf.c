// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// tlsperf observe's capture filter: a socket filter (BPF_PROG_TYPE_SOCKET_FILTER) attached
// with SO_ATTACH_BPF to observe's AF_PACKET socket (src/observe/ebpf.rs loads it with aya).
// It keeps what the classic filter of src/observe/live.rs keeps — TCP and UDP (QUIC) over
// IPv4 (not a non-first fragment) or IPv6 (TCP or UDP as the first next header), to or
// from one of the ports, on loopback not the outgoing copy — and drops in the kernel, before they are copied to
// the ring, the segments observe would not read: those of a connection's direction in
// `done_flows` (user space adds a direction once its side's part of the analysis needs no
// more payload, and removes both when the connection ends or is evicted) that carry no
// SYN, FIN or RST. Segments
// with SYN, FIN or RST always pass whole, so connection ends and the TCP counters still
// work. Each drop is counted (per CPU) and stamps the connection's entry with the time,
// so that user space does not take a connection whose segments it no longer sees for an
// idle one.
//
// Rebuild with src/probes/bpf/build.sh (clang -target bpf); the object is committed.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

// Set by user space at load time (aya's set_global).
volatile const u32 link_header = 14; // bytes before the IP header: 14 Ethernet, 0 raw IP
volatile const u32 loopback = 0;     // drop the outgoing copy (PACKET_OUTGOING)
volatile const u32 any_port = 0;     // every port; else those in `ports`
volatile const u32 snaplen = 262144; // bytes kept of a frame that passes

#define PACKET_OUTGOING 4
#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04

// Counters (per CPU), read by user space.
#define C_DROPPED 0       // segments of done connections dropped
#define C_DROPPED_BYTES 1 // their bytes
#define C_NCOUNTERS 2

// One direction of a connection: the addresses and ports as the segment has them (ports
// in host order; an IPv4 address in the first 4 bytes, family 4 or 6).
struct flow_key {
	u8 saddr[16];
	u8 daddr[16];
	u16 sport;
	u16 dport;
	u32 family;
};

// Observed ports (host order) → 1.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32);
	__type(key, u16);
	__type(value, u8);
} ports SEC(".maps");

// Connections whose payload observe no longer reads → when the last segment was dropped
// (bpf_ktime_get_ns, 0 before the first). User space sizes it at load time for two
// entries per connection its flow table tracks, and removes a connection's when it
// leaves the table, so it does not fill; if it did, an entry refused would only let that
// connection's segments pass. Not preallocated: creating it costs nothing per entry.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 262144);
	__type(key, struct flow_key);
	__type(value, u64);
} done_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_NCOUNTERS);
	__type(key, u32);
	__type(value, u64);
} filter_counters SEC(".maps");

static __always_inline void count(u32 which, u64 n)
{
	u64 *v = bpf_map_lookup_elem(&filter_counters, &which);
	if (v)
		*v += n;
}

SEC("socket")
int observe_filter(struct __sk_buff *skb)
{
	if (loopback && skb->pkt_type == PACKET_OUTGOING)
		return 0;
	u32 l = link_header;
	u32 version;
	if (l == 14) {
		u8 eth[2];
		if (bpf_skb_load_bytes(skb, 12, eth, 2) < 0)
			return 0;
		u32 proto = ((u32)eth[0] << 8) | eth[1];
		if (proto == 0x0800)
			version = 4;
		else if (proto == 0x86dd)
			version = 6;
		else
			return 0;
	} else {
		u8 b0;
		if (bpf_skb_load_bytes(skb, l, &b0, 1) < 0)
			return 0;
		version = b0 >> 4;
	}
	struct flow_key k = {};
	u32 th;
	u8 proto;
	if (version == 4) {
		u8 ip[20];
		if (bpf_skb_load_bytes(skb, l, ip, 20) < 0)
			return 0;
		proto = ip[9];
		if (proto != 6 && proto != 17)
			return 0;
		if (((ip[6] & 0x1f) | ip[7]) != 0)
			return 0; // a non-first fragment
		u32 ihl = (ip[0] & 0xf) * 4;
		if (ihl < 20)
			return 0;
		k.family = 4;
		__builtin_memcpy(k.saddr, ip + 12, 4);
		__builtin_memcpy(k.daddr, ip + 16, 4);
		th = l + ihl;
	} else if (version == 6) {
		u8 ip[40];
		if (bpf_skb_load_bytes(skb, l, ip, 40) < 0)
			return 0;
		proto = ip[6];
		if (proto != 6 && proto != 17)
			return 0;
		k.family = 6;
		__builtin_memcpy(k.saddr, ip + 8, 16);
		__builtin_memcpy(k.daddr, ip + 24, 16);
		th = l + 40;
	} else {
		return 0;
	}
	u8 th4[4];
	if (bpf_skb_load_bytes(skb, th, th4, 4) < 0)
		return 0;
	k.sport = ((u16)th4[0] << 8) | th4[1];
	k.dport = ((u16)th4[2] << 8) | th4[3];
	if (!any_port && !bpf_map_lookup_elem(&ports, &k.sport) &&
	    !bpf_map_lookup_elem(&ports, &k.dport))
		return 0;
	// UDP (QUIC): every datagram on the ports passes.
	if (proto == 17)
		return snaplen;
	u8 flags;
	if (bpf_skb_load_bytes(skb, th + 13, &flags, 1) < 0)
		return 0;
	if (flags & (TCP_FIN | TCP_SYN | TCP_RST))
		return snaplen;
	u64 *seen = bpf_map_lookup_elem(&done_flows, &k);
	if (!seen)
		return snaplen;
	*seen = bpf_ktime_get_ns();
	count(C_DROPPED, 1);
	count(C_DROPPED_BYTES, skb->len);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
