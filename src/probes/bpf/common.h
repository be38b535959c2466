// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// What probes.bpf.c and owners.bpf.c share: the integer types, the address families and
// TCP states they compare with, the layout of the sock:inet_sock_set_state tracepoint's
// arguments, and the reading of a peer's sockaddr from user memory.

#ifndef TLSPERF_BPF_COMMON_H
#define TLSPERF_BPF_COMMON_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

typedef unsigned long long u64;
typedef long long s64;
typedef unsigned int u32;
typedef int s32;
typedef unsigned short u16;
typedef unsigned char u8;

#define AF_INET 2
#define AF_INET6 10
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_CLOSE 7

// sock:inet_sock_set_state's arguments (its tracepoint format).
struct set_state_args {
	u64 common;
	const void *skaddr;
	s32 oldstate;
	s32 newstate;
	u16 sport;
	u16 dport;
	u16 family;
	u16 protocol;
	u8 saddr[4];
	u8 daddr[4];
	u8 saddr_v6[16];
	u8 daddr_v6[16];
};

// read_sockaddr's failures.
#define SOCKADDR_UNREAD -1 // no address, or it could not be read
#define SOCKADDR_NOT_IP -2 // an address of another family (a Unix socket's)

// Reads a sockaddr_in/sockaddr_in6 from user memory: family, port (host order), address.
// 0, or SOCKADDR_UNREAD or SOCKADDR_NOT_IP.
static __always_inline int read_sockaddr(u64 uaddr, u16 *family, u16 *port, u8 addr[16])
{
	u8 buf[24] = {};
	if (!uaddr || bpf_probe_read_user(buf, 16, (void *)uaddr) != 0)
		return SOCKADDR_UNREAD;
	u16 fam = buf[0] | (buf[1] << 8);
	if (fam == AF_INET6 && bpf_probe_read_user(buf, 24, (void *)uaddr) != 0)
		return SOCKADDR_UNREAD;
	*port = (buf[2] << 8) | buf[3];
	if (fam == AF_INET) {
		__builtin_memcpy(addr, buf + 4, 4);
	} else if (fam == AF_INET6) {
		__builtin_memcpy(addr, buf + 8, 16);
	} else {
		return SOCKADDR_NOT_IP;
	}
	*family = fam;
	return 0;
}

#endif
