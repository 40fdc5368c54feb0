/* perfkit's TCP for load testing over DPDK (dperf's job): an HTTP server and an HTTP
 * client, one worker thread per engine on one port opened by dpdk_engine.c.
 *
 * The design follows what dperf describes (the code is perfkit's own):
 *   - every socket is preallocated, one cache line each, in one array indexed by
 *     (client address, client port, server port): no hashing, no allocation;
 *   - stop-and-wait: one message (request or response) in flight per direction,
 *     resent from its first unacknowledged byte when the retransmission timer fires,
 *     given up after `retries`; timers are FIFO lists (one timeout each, so the list
 *     is in deadline order);
 *   - headers come from a template; payload checksums come from prefix sums of the
 *     one request/response, so a segment's checksum costs a few additions;
 *   - no TIME_WAIT: a closed socket is free at once, and a FIN that arrives for a
 *     closed socket is acknowledged from the segment itself.
 * Every segment is bounds-checked; bad ones are counted (bad_rx, tcp_drop) and dropped.
 * The port answers ARP and ICMP echo for its addresses; over IPv6, Neighbor
 * Solicitations (to the address or its solicited-node group) and ICMPv6 echo, and the
 * client finds its gateway's MAC with a Neighbor Solicitation.
 */
#ifndef PERFKIT_TCP_ENGINE_H
#define PERFKIT_TCP_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "dpdk_engine.h"

enum pk_tcp_role { PK_TCP_SERVER = 0, PK_TCP_CLIENT = 1 };

#define PK_TCP_MAX_RANGES 8
#define PK_TCP_MAX_SOCKETS (1u << 30)   /* one worker's table: 64 GiB of address space, taken page by page */
#define PK_TCP_MAX_OWN 2
#define PK_TCP_MAX_MSG ((1u << 20) + 4096)
#define PK_TCP_MAX_PIPELINE 100         /* dperf's PIPELINE_MAX */
#define PK_TCP_MAX_DIPS 65536           /* dperf's change_dip list: at most this many addresses */

typedef struct pk_tcp_cfg {
    int role;
    uint32_t ip;                 /* the port's own address (network order) */
    uint32_t server_ip;          /* CLIENT: where connections go (network order) */
    uint32_t gateway_ip;         /* CLIENT: next hop to ARP for (network order) */
    uint8_t gateway_mac[6];
    int gateway_mac_set;
    uint32_t client_first[PK_TCP_MAX_RANGES];  /* client address ranges, host order */
    uint32_t client_num[PK_TCP_MAX_RANGES];
    int nranges;                 /* CLIENT: exactly 1 */
    /* IPv6 (ipv6 = 1): ip6, server_ip6 and gateway_ip6 stand for ip, server_ip and
     * gateway_ip; a client address is client6_hi (its first 12 bytes, one for every
     * range) followed by client_first + k (host order) as its last 4 bytes */
    int ipv6;
    uint8_t ip6[16], server_ip6[16], gateway_ip6[16];
    uint8_t client6_hi[12];
    uint16_t listen, listen_num;
    uint16_t lport_lo, lport_hi; /* CLIENT */
    uint16_t mss;
    uint8_t tos;
    uint16_t vlan;               /* 802.1Q VLAN id on every frame, 0 = untagged */
    int tcp_rst;
    uint64_t rto_ns;
    uint32_t retries;
    uint32_t burst;
    uint64_t duration_ns;        /* SERVER: serve this long; CLIENT: launch this long (after wait) */
    const uint8_t *msg;          /* SERVER: the response; CLIENT: the request (copied) */
    uint32_t msg_len;
    int keepalive;               /* SERVER: leave closing to the client */
    /* CLIENT */
    double cps;
    uint64_t cc;
    uint64_t ka_interval_ns;     /* 0 = one request per connection */
    uint32_t ka_requests;        /* 0 = until the end */
    uint32_t launch_num;
    uint64_t slow_start_ns, wait_ns;
    int fast_close;
    int flood;                   /* CLIENT: SYNs only, no sockets (a SYN-ACK is answered with RST) */
    int cpu;
    uint16_t queue;              /* this worker's rx/tx queue pair; queue 0 claims the port
                                    and reads its NIC counters (several queues: one engine each) */
    /* further address ranges of the port that ARP, ND and ping are answered for (a server's
     * port address and its server addresses; TCP is served on ip only): host order, IPv6 as
     * own6_hi[k] (first 12 bytes) and own_first[k] + i as the last 4 */
    uint32_t own_first[PK_TCP_MAX_OWN];
    uint32_t own_num[PK_TCP_MAX_OWN];
    uint8_t own6_hi[PK_TCP_MAX_OWN][12];
    int nown;
    /* dperf's disable_ack: a CLIENT leaves a complete response unacknowledged; its next
     * request (or FIN) carries the ACK */
    int disable_ack;
    /* dperf's non-HTTP payload: a SERVER answers each request segment with msg; a CLIENT's
     * response is msg_len bytes back (no HTTP parsed) */
    int raw;
    /* dperf's protocol udp: a request in one datagram, its answer in one (tcp_udp.c); msg
     * fits one frame */
    int udp;
    /* dperf's pipeline: a protocol udp CLIENT with keep-alive keeps this many requests out on
     * a socket (0 or 1: one) */
    uint32_t pipeline;
    /* dperf's change_dip: a flood CLIENT's packets go to these addresses in turn instead of
     * server_ip (this worker's share of the list): IPv4 in dips (host order), IPv6 in dips6
     * (16 bytes each); copied at create */
    const uint32_t *dips;
    const uint8_t *dips6;
    uint32_t ndips;
    /* dperf's vxlan: every frame goes out in outer Ethernet/IPv4/UDP (port 4789)/VXLAN headers
     * from vtep_local to vtep_remote (network order) with the VNI, its inner Ethernet header
     * from inner_smac to inner_dmac; only such frames to vtep_local with this VNI come in
     * (outer ARP and ping for the port's addresses aside). Inner IPv4, no VLAN. */
    int vxlan;
    uint32_t vni;
    uint8_t inner_smac[6], inner_dmac[6];
    uint32_t vtep_local, vtep_remote;
} pk_tcp_cfg;

#define PK_VXLAN_PORT 4789
#define PK_VXLAN_SPORT 6666          /* dperf's outer source port, plus the queue */
#define PK_VXLAN_HDRS (14 + 20 + 8 + 8)   /* outer Ethernet, IPv4, UDP and the VXLAN header */

/* protocol udp: a message's bytes in one 1500-byte IP packet (IPv4 or IPv6 and UDP headers) */
#define PK_TCP_UDP_MAX_MSG(ipv6) ((ipv6) ? 1452u : 1472u)

typedef struct pk_tcp_engine pk_tcp_engine;

pk_tcp_engine *pk_tcp_create(pk_dpdk_port *port, const pk_tcp_cfg *cfg, char *err, size_t errlen);
int pk_tcp_start(pk_tcp_engine *e, char *err, size_t errlen);
void pk_tcp_stop(pk_tcp_engine *e);
int pk_tcp_running(const pk_tcp_engine *e);
void pk_tcp_join(pk_tcp_engine *e);
/* After every queue's engine on the port was joined: queue 0's last read of the port's NIC
 * counters (a queue that ended later may have made the PMD count more). Start queue 0
 * first: its pk_tcp_start reads the counters' base before any worker runs. */
void pk_tcp_nic_last(pk_tcp_engine *e);
void pk_tcp_snapshot(const pk_tcp_engine *e, uint64_t *counters, uint64_t *hist);
const char *pk_tcp_error(const pk_tcp_engine *e);
void pk_tcp_destroy(pk_tcp_engine *e);

#endif
