#!/bin/bash
# Runs inside the guest (chrooted into the host's root): brings up two Soft-RoCE devices on a veth
# pair (rxe0 on veth0 = 169.254.77.1, rxe1 on veth1 = 169.254.77.2) and rxe_lo on lo, plus, with
# two guests, rxe_eth on the private QEMU link. The guest has no NIC to the host; these
# link-local addresses exist only inside it.
set -euo pipefail
A=169.254.77.1 B=169.254.77.2
sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.default.accept_local=1
ip link set lo up
ip link add veth0 type veth peer name veth1
ip addr add $A/24 dev veth0
ip addr add $B/24 dev veth1
# Jumbo frames, as RoCE fabrics run them: the ports' RDMA MTU becomes 4096, so a UD datagram
# (one ud-mcast message) holds up to 4064 bytes instead of 992.
ip link set veth0 mtu 9000
ip link set veth1 mtu 9000
ip link set veth0 up
ip link set veth1 up
# Both ends live in one namespace, so the kernel would route A<->B via lo, which rxe drops. Look
# up the local table after our rules, and send locally generated traffic to the other end out of
# the right veth; arriving traffic is still delivered locally.
ip rule add pref 1000 lookup local
ip rule del pref 0
ip route add $B dev veth0 src $A table 100
ip route add $A dev veth1 src $B table 101
ip rule add pref 100 iif lo to $B lookup 100
ip rule add pref 101 iif lo to $A lookup 101
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1
rdma link add rxe_lo type rxe netdev lo
if [ -n "${RIG_GUEST_ADDR:-}" ] && ip link show eth0 >/dev/null 2>&1; then
  ip addr add "$RIG_GUEST_ADDR/24" dev eth0
  ip link set eth0 up
  rdma link add rxe_eth type rxe netdev eth0
fi
if [ "${RIG_HUGEPAGES:-0}" -gt 0 ]; then
  echo "$RIG_HUGEPAGES" > /proc/sys/vm/nr_hugepages
  mkdir -p /dev/hugepages
  mount -t hugetlbfs -o pagesize=2M none /dev/hugepages
fi
