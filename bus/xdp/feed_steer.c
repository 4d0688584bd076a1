// SPDX-License-Identifier: MIT OR Apache-2.0
// tickbus's XDP program for kernel-bypass feed ingest (tickbus::xdp). It steers only the feed's
// datagrams (IPv4/UDP to a destination address and port in STEER, on its VLAN) to the AF_XDP
// socket of the receive queue they arrived on (XSKS), and passes every other frame to the kernel
// untouched: ARP, IPv6, TCP, other UDP ports, other VLANs. A first fragment to a steered port is
// steered too, so user space counts and drops it (never reassembled); later fragments, which
// carry no port, go to the kernel. Built by bus/build.rs with
// `clang -O2 -g -target bpf` (the `xdp` feature); loaded and attached by aya.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)BPF_FUNC_redirect_map;

#define be16(x) ((__u16)__builtin_bswap16(x))
#define MAX_STEER 8

// One steered destination: address and port in network byte order; port 0 ends the list;
// the VLAN it must arrive on (host order; 0: untagged or priority-tagged only).
struct steer {
	__u32 addr;
	__u16 port;
	__u16 vlan;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} XSKS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_STEER);
	__type(key, __u32);
	__type(value, struct steer);
} STEER SEC(".maps");

struct vlan_hdr {
	__u16 tci;
	__u16 proto;
};

SEC("xdp")
int tickbus_feed_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	__u16 proto = eth->h_proto;
	__u16 vid = 0; // the outermost tag's VLAN id
	void *p = eth + 1;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (proto == be16(ETH_P_8021Q) || proto == be16(ETH_P_8021AD)) {
			struct vlan_hdr *v = p;
			if ((void *)(v + 1) > end)
				return XDP_PASS;
			if (i == 0)
				vid = be16(v->tci) & 0x0fff;
			proto = v->proto;
			p = v + 1;
		}
	}
	if (proto != be16(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = p;
	if ((void *)(ip + 1) > end)
		return XDP_PASS;
	if (ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	// A fragment after the first carries no UDP header, so no port: the kernel's (it cannot be
	// told apart from another port's). A first fragment has the header and is steered by it,
	// for user space to count and drop.
	if (ip->frag_off & be16(0x1fff))
		return XDP_PASS;
	struct udphdr *udp = (void *)ip + ip->ihl * 4;
	if (ip->ihl < 5 || (void *)(udp + 1) > end)
		return XDP_PASS;
	__u16 port = udp->dest;
#pragma unroll
	for (__u32 k = 0; k < MAX_STEER; k++) {
		__u32 key = k;
		struct steer *s = bpf_map_lookup_elem(&STEER, &key);
		if (!s || s->port == 0)
			return XDP_PASS;
		if (s->addr == ip->daddr && s->port == port && s->vlan == vid)
			// No socket on this queue: XDP_PASS (the kernel's, as if not steered).
			return bpf_redirect_map(&XSKS, ctx->rx_queue_index, XDP_PASS);
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
