/* The one list of perfkit counters.
 *
 * Every engine writes these, one block per worker; Python derives its schema
 * (polars columns, JSON keys, chart labels) from this list through
 * perfkit._counters, so C, Cython and Python never drift.
 *
 * X(name, kind, unit, group, label)
 *   kind  SUM    monotonic count; a row shows its per-second rate and its total
 *         GAUGE  current value (summed over workers), shown as is
 *         MIN    smallest value seen (minimum over workers; 0 = none seen)
 *         MAX    largest value seen (maximum over workers)
 *   unit  what one count is: pkt, byte, ns, conn, req, ...
 *   group which part of an engine writes it: traffic, tcp, sock, http, nic, seq, latency,
 *         cpu, probe, control; an engine declares the groups it writes and a run's frame keeps
 *         only those columns
 */
#ifndef PERFKIT_COUNTERS_H
#define PERFKIT_COUNTERS_H

#include <stdint.h>

#define PK_COUNTERS(X)                                                                             \
    /* traffic */                                                                                  \
    X(pkts_tx,         SUM,   "pkt",  traffic,  "packets sent")                                    \
    X(pkts_rx,         SUM,   "pkt",  traffic,  "packets received")                                \
    X(bytes_tx,        SUM,   "byte", traffic,  "payload bytes sent")                              \
    X(bytes_rx,        SUM,   "byte", traffic,  "payload bytes received")                          \
    X(drop_tx,         SUM,   "pkt",  traffic,  "packets the sender could not send")               \
    X(tcp_rx,          SUM,   "pkt",  traffic,  "TCP packets received")                            \
    X(udp_rx,          SUM,   "pkt",  traffic,  "UDP packets received")                            \
    X(arp_rx,          SUM,   "pkt",  traffic,  "ARP packets received")                            \
    X(icmp_rx,         SUM,   "pkt",  traffic,  "ICMP packets received")                           \
    X(other_rx,        SUM,   "pkt",  traffic,  "other packets received")                          \
    X(bad_rx,          SUM,   "pkt",  traffic,  "malformed packets received")                      \
    /* TCP state machine (DPDK engine) */                                                          \
    X(syn_tx,          SUM,   "pkt",  tcp,      "SYN sent")                                        \
    X(syn_rx,          SUM,   "pkt",  tcp,      "SYN received")                                    \
    X(fin_tx,          SUM,   "pkt",  tcp,      "FIN sent")                                        \
    X(fin_rx,          SUM,   "pkt",  tcp,      "FIN received")                                    \
    X(rst_tx,          SUM,   "pkt",  tcp,      "RST sent")                                        \
    X(rst_rx,          SUM,   "pkt",  tcp,      "RST received")                                    \
    X(retrans_syn,     SUM,   "pkt",  tcp,      "SYN retransmits")                                 \
    X(retrans_fin,     SUM,   "pkt",  tcp,      "FIN retransmits")                                 \
    X(retrans_ack,     SUM,   "pkt",  tcp,      "ACK retransmits")                                 \
    X(retrans_push,    SUM,   "pkt",  tcp,      "data retransmits")                                \
    X(tcp_drop,        SUM,   "pkt",  tcp,      "TCP packets dropped")                             \
    /* sockets / connections */                                                                    \
    X(sock_open,       SUM,   "conn", sock,     "connections opened")                              \
    X(sock_close,      SUM,   "conn", sock,     "connections closed")                              \
    X(sock_current,    GAUGE, "conn", sock,     "connections open now")                            \
    X(sock_error,      SUM,   "conn", sock,     "connection errors")                               \
    /* HTTP */                                                                                     \
    X(http_get,        SUM,   "req",  http,     "HTTP GET sent")                                   \
    X(http_post,       SUM,   "req",  http,     "HTTP POST sent")                                  \
    X(http_req,        SUM,   "req",  http,     "HTTP requests sent")                              \
    X(http_resp,       SUM,   "req",  http,     "HTTP responses received whole")                   \
    X(http_2xx,        SUM,   "req",  http,     "HTTP 2xx responses")                              \
    X(http_3xx,        SUM,   "req",  http,     "HTTP 3xx responses")                              \
    X(http_4xx,        SUM,   "req",  http,     "HTTP 4xx responses")                              \
    X(http_5xx,        SUM,   "req",  http,     "HTTP 5xx responses")                              \
    X(http_err,        SUM,   "req",  http,     "HTTP requests failed: 4xx, 5xx or no response")   \
    X(err_connect,     SUM,   "conn", http,     "connections refused or failed")                   \
    X(err_timeout,     SUM,   "req",  http,     "connect or response timeouts")                    \
    X(err_reset,       SUM,   "conn", http,     "connections reset by the peer")                   \
    X(err_read,        SUM,   "req",  http,     "responses cut short or malformed")                \
    /* NIC / PMD */                                                                                \
    X(nic_ierrors,     SUM,   "pkt",  nic,      "NIC receive errors")                              \
    X(nic_oerrors,     SUM,   "pkt",  nic,      "NIC transmit errors")                             \
    X(nic_imissed,     SUM,   "pkt",  nic,      "NIC receive misses")                              \
    /* sequence numbers in the payload */                                                          \
    X(seq_lost,        SUM,   "pkt",  seq,      "packets lost (sequence gaps)")                    \
    X(seq_dup,         SUM,   "pkt",  seq,      "duplicate packets")                               \
    X(seq_reorder,     SUM,   "pkt",  seq,      "packets out of order")                            \
    /* latency: one-way from the in-packet timestamp, or a round trip */                           \
    X(lat_count,       SUM,   "pkt",  latency,  "latency samples")                                 \
    X(lat_sum_ns,      SUM,   "ns",   latency,  "latency sum")                                     \
    X(lat_min_ns,      MIN,   "ns",   latency,  "latency minimum")                                 \
    X(lat_max_ns,      MAX,   "ns",   latency,  "latency maximum")                                 \
    X(jitter_sum_ns,   SUM,   "ns",   latency,  "sum of |latency - previous latency|")             \
    /* the engine's own CPU use */                                                                 \
    X(cpu_busy_ns,     SUM,   "ns",   cpu,      "worker CPU time")                                 \
    X(cpu_wall_ns,     SUM,   "ns",   cpu,      "worker wall time")                                \
    /* of cpu_busy_ns, the time in user mode (socket engine; the kernel splits                     \
     * a thread's run time by where its ticks fell) */                                             \
    X(cpu_user_ns,     SUM,   "ns",   cpu,      "worker CPU time in user mode")                    \
    /* HTTPS client */                                                                             \
    X(err_tls,         SUM,   "conn", http,     "TLS handshakes failed")                           \
    X(http_cut,        SUM,   "req",  http,     "HTTP requests still out when stopped")            \
    /* socket receivers asked to read what arrives (qperf's -ar) */                                \
    X(bytes_read,      SUM,   "byte", traffic,  "received bytes read by the receiver")             \
    /* latency probes beside a load (DPDK engine): their own samples */                            \
    X(probe_tx,        SUM,   "pkt",  probe,    "latency probes sent")                             \
    X(probe_rx,        SUM,   "pkt",  probe,    "latency probes received (with a sample)")         \
    X(probe_lat_sum_ns, SUM,   "ns",   probe,    "probe latency sum")                              \
    X(probe_lat_min_ns, MIN,   "ns",   probe,    "probe latency minimum")                          \
    X(probe_lat_max_ns, MAX,   "ns",   probe,    "probe latency maximum")                          \
    /* first-packet RTT (DPDK TCP): client SYN -> SYN-ACK, server SYN-ACK -> ACK;                  \
     * first transmissions only (a retransmitted SYN's answer is ambiguous) */                     \
    X(rtt_count,       SUM,   "conn", tcp,      "first-packet RTT samples")                        \
    X(rtt_sum_ns,      SUM,   "ns",   tcp,      "first-packet RTT sum")                            \
    X(rtt_max_ns,      MAX,   "ns",   tcp,      "first-packet RTT maximum")                        \
    /* a polling worker's loop passes longer than a scheduler slice: it was not on                 \
     * its CPU (DPDK TCP; kept out of cpu_busy_ns) */                                              \
    X(cpu_stall_ns,    SUM,   "ns",   cpu,      "worker time descheduled (loop passes over 1 ms)")  \
    /* HTTP load: virtual users running now (a stage plan adds and retires them) */                \
    X(http_users,      GAUGE, "user", http,     "virtual users running")                           \
    /* HTTP load, open loop: the request rate due now (a rate stage plan moves it) */               \
    X(http_rate,       GAUGE, "req/s", http,    "open loop: requests/s due now")                   \
    /* live control of a running load (DPDK flows): the pacer's target now, set_rate moves it;     \
     * the flows a generator sends now, growing at flow_rate up to flows_max */                    \
    X(rate_target,     GAUGE, "pkt/s", control,  "target send rate now (packets/s)")                \
    X(flows_active,    GAUGE, "flow", control,  "flows being sent now")                           \
    /* DPDK TCP: a whole exchange whose close the peer never acknowledged (our FIN retransmitted    \
     * to the end: a peer that drops FINs for sockets it closed, as dperf does); not sock_error */ \
    X(close_timeout,   SUM,   "conn", sock,     "connections closed by timeout after a whole exchange") \
    /* the PMD's frame counts of a port (DPDK): one worker per port writes them, so a run's      \
     * directions each read their sending port's opackets and their receiving port's ipackets */ \
    X(nic_ipackets,    SUM,   "pkt",  nic,      "NIC frames received")                             \
    X(nic_opackets,    SUM,   "pkt",  nic,      "NIC frames sent")                               \
    /* DPDK TCP: frames handed to the transmit queue by kind, as dperf counts them (a frame the     \
     * port then drops is in drop_tx as well), and dperf's other receive counts */                 \
    X(tcp_tx,          SUM,   "pkt",  tcp,      "TCP frames sent")                                 \
    X(udp_tx,          SUM,   "pkt",  tcp,      "UDP frames sent")                                 \
    X(arp_tx,          SUM,   "pkt",  tcp,      "ARP frames sent")                                 \
    X(icmp_tx,         SUM,   "pkt",  tcp,      "ICMP and ICMPv6 frames sent")                     \
    X(tos_rx,          SUM,   "pkt",  tcp,      "IP packets received with this side's tos (tos set)") \
    X(udp_drop,        SUM,   "pkt",  tcp,      "UDP datagrams received for no socket")            \
    X(ack_dup,         SUM,   "pkt",  tcp,      "duplicate ACKs received (nothing new, data out)")  \
    /* DPDK TCP engine, dperf's protocol udp: a client's request that got no answer (dperf's udpRt) */ \
    X(udp_rt,          SUM,   "req",  tcp,      "UDP requests unanswered (timed out)")       \
    /* DPDK TCP engine with vxlan: a VXLAN frame to this VTEP refused by decapsulation (cut    \
     * short, bad outer UDP sum, flags without the VNI bit, another VNI); kept out of bad_rx */ \
    X(vxlan_drop,      SUM,   "pkt",  tcp,      "VXLAN frames dropped (bad outer header or other VNI)")

enum pk_counter_kind { PK_SUM = 0, PK_GAUGE = 1, PK_MIN = 2, PK_MAX = 3 };

enum pk_counter_id {
#define PK_X_ENUM(name, kind, unit, group, label) PK_##name,
    PK_COUNTERS(PK_X_ENUM)
#undef PK_X_ENUM
    PK_NCOUNTERS
};

/* One writer per block: the worker that owns it. Readers take relaxed
 * 64-bit loads; aligned 64-bit stores are atomic on every target we build. */
typedef struct pk_counter_block {
    uint64_t v[PK_NCOUNTERS];
} __attribute__((aligned(64))) pk_counter_block;

static inline void pk_add(pk_counter_block *b, enum pk_counter_id id, uint64_t n)
{
    __atomic_store_n(&b->v[id], b->v[id] + n, __ATOMIC_RELAXED);
}

static inline void pk_set(pk_counter_block *b, enum pk_counter_id id, uint64_t x)
{
    __atomic_store_n(&b->v[id], x, __ATOMIC_RELAXED);
}

static inline uint64_t pk_read(const pk_counter_block *b, enum pk_counter_id id)
{
    return __atomic_load_n(&b->v[id], __ATOMIC_RELAXED);
}

/* Tables for the Python side (perfkit._counters). */
extern const char *const pk_counter_names[PK_NCOUNTERS];
extern const char *const pk_counter_units[PK_NCOUNTERS];
extern const char *const pk_counter_groups[PK_NCOUNTERS];
extern const char *const pk_counter_labels[PK_NCOUNTERS];
extern const int pk_counter_kinds[PK_NCOUNTERS];

#endif
