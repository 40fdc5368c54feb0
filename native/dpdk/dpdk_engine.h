/* perfkit's DPDK engine: EAL once per process, ports from vdev strings, and
 * datapath workers (UDP generator, rxonly receiver, reverse reflector, forwarder
 * between two ports).
 *
 * The shapes follow the socket engine (sock_engine.h): an engine is a set of
 * workers, one pthread each, every worker owns one counter block and one
 * histogram and never touches Python. Datapath threads are plain pthreads that
 * call rte_thread_register() (mempool caches) and are bounded in time.
 *
 * Ports are separate objects, opened and closed by the caller (perfkit._dpdk):
 *   a DPDK vdev string   net_null0, net_ring0 (a loopback: it receives what it sends),
 *                        net_af_packet0,iface=X, net_memif0,role=server,...
 *                        added by rte_dev_probe, removed by rte_eal_hotplug_remove;
 *   ring:NAME:0|1        the two ends of an in-process pair joined by two rte_rings
 *                        (what one end sends the other receives), made with
 *                        rte_eth_from_rings; the rings go when both ends are closed.
 * Every frame buffer comes from one process-wide mempool made at EAL init, so a
 * closed engine or port can be checked for leaks: the pool is full again.
 *
 * The code is cut by concern (EAL, ports, memif, generator, receiver, forwarder, ARP, ICMP,
 * the engine): dpdk_internal.h lists the units and holds what they share.
 */
#ifndef PERFKIT_DPDK_ENGINE_H
#define PERFKIT_DPDK_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "perfkit/counters.h"
#include "perfkit/hist.h"

enum pk_dpdk_role {
    PK_DPDK_GEN = 0,   /* UDP generator: template frames, flows, pacing, wire header */
    PK_DPDK_RXONLY,    /* count and parse; per-flow loss/dup/reorder and latency */
    PK_DPDK_REVERSE,   /* send UDP back: MACs, IPs and ports swapped */
    PK_DPDK_FORWARD,   /* every frame received on port leaves by out_port (testpmd's io/mac fwd) */
    PK_DPDK_NROLES
};

#define PK_DPDK_MAX_PATTERN 1024   /* frame sizes in one size pattern */

typedef struct pk_dpdk_worker_cfg {
    int role;
    int port;              /* index into the ports given to pk_dpdk_create; one worker per (port, queue) */
    int peer;              /* GEN: index of the worker that receives its frames in this engine, or -1 */
    int track;             /* GEN: 1 = frames come back (a reverse peer): loss and round trips here;
                              2 = bidirectional: it also receives the flows of the generators
                              whose peer it is (or is on its port), as a receiver would */
    uint32_t size;         /* GEN: Ethernet frame bytes counting the 4-byte FCS, 64..9018 */
    uint32_t flows;        /* GEN: flows sent; RXONLY: flow ids tracked (receivers on one port share
                              one table, flow ids 0 .. the largest of theirs) */
    uint32_t burst;        /* frames per rx/tx burst, 1..PK_DPDK_MAX_BURST */
    double rate;           /* GEN: frames per second; 0 = as fast as the port takes them */
    uint64_t duration_ns;  /* GEN: how long to send; others without a feeder: how long to run */
    uint8_t dst_mac[6];
    int dst_mac_set;       /* GEN: 0 = the peer port's MAC, else ARP for dst_ip (then broadcast) */
    uint32_t dst_ip;       /* GEN: destination, network order */
    uint16_t sport;        /* GEN: flow f is sent from UDP port sport + f */
    uint16_t dport;
    int cpu;               /* pin the thread to this CPU, -1 = do not pin */
    uint32_t drop_every;   /* RXONLY, tests only: drop every Nth UDP frame unseen (a lossy link) */
    /* GEN: the ranges flows are spread over; 0 counts as 1 (sports: 0 = flows).
     * Flow f is the f-th tuple, source port varying fastest, then destination
     * port, source address (the port's + i), destination address (dst_ip + i).
     * REVERSE: dst_ips = how many addresses from the port's own it reflects for. */
    uint32_t src_ips, dst_ips, sports, dports;
    /* GEN: frame sizes (FCS counted) sent in this order, round and round;
     * nsizes = 0: every frame is `size`. */
    uint16_t sizes[PK_DPDK_MAX_PATTERN];
    uint32_t nsizes;
    /* GEN: a ramp: the rate rises linearly from `rate` to rate_end over ramp_ns,
     * then stays at rate_end. ramp_ns = 0: no ramp. */
    double rate_end;
    uint64_t ramp_ns;
    /* the port's queue this worker polls and sends on (several workers share a
     * port on distinct queues); GEN: its flows are flow_first .. flow_first +
     * flows - 1 of the ranges (generators on one port split the flows) */
    uint16_t queue;
    uint32_t flow_first;
    /* GEN: a latency probe stream beside the load: probe_rate frames/s (0 = none)
     * of probe_size bytes, flagged in the payload, with their own sequence (one
     * probe flow per generator queue) and their own histogram at the receiver */
    double probe_rate;
    uint32_t probe_size;
    /* FORWARD: frames received on (port, queue) leave by (out_port, queue), untouched
     * (io) or, with dst_mac_set, with destination dst_mac and the out port's MAC as
     * source (mac). with_worker: -1, or another FORWARD worker (the other direction)
     * whose loop this worker's thread runs too: one lcore for both directions.
     * REVERSE: -1 (reflect on port), or the port the reflected frames leave by (BiTester's
     * -t), with that port's MAC as source and dst_mac (when set) as destination. */
    int out_port;
    int with_worker;
    /* RXONLY, tests only: after its first frame, poll nothing for this long (a receiver that
     * falls behind: the port's rx ring overflows) */
    uint64_t pause_ns;
    /* GEN: flows that grow while running (BiTester's flow timer): it starts sending flows_start
     * of its `flows` (0 = all of them) and adds flow_rate flows per second (0 = none) until it
     * sends all `flows`; flows_active says how many it sends now */
    uint32_t flows_start;
    double flow_rate;
    /* RXONLY, tests only: take at most this many frames per second (0 = all): a receiver of
     * known capacity, whose port's queue fills and holds the sender back */
    double rx_cap;
    /* GEN: stop once this many load frames went out (a counted burst: RFC 2544's back-to-back,
     * sent as fast as the port takes them when unpaced); 0 = until the duration ends */
    uint64_t count;
    /* GEN with a peer: 1 = the peer receives on this side's own second port what a far end
     * elsewhere sends back (BiTester's -r): the destination MAC by ARP, as without a peer */
    int peer_back;
} pk_dpdk_worker_cfg;

#define PK_DPDK_MAX_WORKERS 16
#define PK_DPDK_MAX_QUEUES  8     /* per port */
#define PK_DPDK_MAX_FLOWS   131072   /* 528 B of sequence window each, preallocated */
#define PK_DPDK_MAX_BURST   256
#define PK_DPDK_MIN_SIZE    64
#define PK_DPDK_MAX_SIZE    1518     /* a standard Ethernet frame */
#define PK_DPDK_MAX_JUMBO   9018     /* jumbo (MTU 9000): one mbuf of a second pool each */
#define PK_DPDK_DRAIN_NS    1000000000ull  /* receivers wait at most this after duration */
#define PK_DPDK_ARP_NS      1000000000ull  /* a generator ARPs this long for its destination */

/* ------------------------------------------------------------------ EAL */

/* rte_eal_init once per process, with these arguments (argv[0] included).
 * The calling thread's CPU affinity is kept (saved and restored around init).
 * Makes the process-wide mbuf pool of nb_mbufs buffers.
 * 0 on success; -1 + err. A second call after success returns 0 and does
 * nothing; after a failure it fails at once (EAL cannot be initialised twice). */
int pk_dpdk_eal_init(int argc, const char *const *argv, uint32_t nb_mbufs, char *err, size_t errlen);
/* 0 = not initialised, 1 = up, -1 = init failed (restart the process) */
int pk_dpdk_eal_state(void);
/* The process-wide pool: its size and how many buffers are free right now. */
void pk_dpdk_pool_counts(uint32_t *size, uint32_t *avail);
/* Ports open now (perfkit's), and ethdev ports DPDK knows about. */
int pk_dpdk_ports_open(void);
int pk_dpdk_ethdev_count(void);
uint64_t pk_dpdk_tsc_hz(void);

/* ---------------------------------------------------------------- ports */

typedef struct pk_dpdk_port pk_dpdk_port;

/* Probe (or make) the port, configure one rx and one tx queue, start it.
 * netns: a network namespace file to probe in ("" or NULL = ours): af_packet
 * binds its socket there. NULL + err on failure. */
pk_dpdk_port *pk_dpdk_port_open(const char *dev, const char *netns, char *err, size_t errlen);
/* The same with nq rx and tx queues (1..PK_DPDK_MAX_QUEUES; the PMD may take fewer).
 * Where the PMD has RSS (NICs, tap), it spreads flows over the rx queues; a ring
 * pair (both ends opened with nq) and net_ring / memif join tx queue q to rx queue q. */
pk_dpdk_port *pk_dpdk_port_open_q(const char *dev, const char *netns, int nq, char *err, size_t errlen);
int pk_dpdk_port_queues(const pk_dpdk_port *p);
/* The same with an MTU (0 = the device's own): clamped to what the device takes (min_mtu,
 * max_mtu, max_rx_pktlen less the Ethernet header and FCS). */
pk_dpdk_port *pk_dpdk_port_open_cfg(const char *dev, const char *netns, int nq, int mtu, char *err, size_t errlen);

/* What port setup chose from what the device reports (rte_eth_dev_info), and what it reports. */
typedef struct pk_dpdk_port_setup {
    char driver[32];
    uint16_t queues, max_rx_queues, max_tx_queues;
    int rss;                       /* rx flows spread over the queues by RSS */
    int rss_key;                   /* 0 none, 1 symmetric (0x6d5a repeated), 2 the PMD's own */
    uint8_t hash_key_size;         /* bytes of the device's Toeplitz key (0: not said) */
    uint64_t rss_hf, flow_type_rss_offloads;
    uint64_t rx_offload_capa, tx_offload_capa;
    uint64_t rx_offloads, tx_offloads;   /* enabled on the port */
    uint32_t mtu, mtu_asked, min_mtu, max_mtu, max_rx_pktlen;
    uint16_t nb_rxd, nb_txd;
    uint16_t rx_desc_min, rx_desc_max, rx_desc_align, tx_desc_min, tx_desc_max, tx_desc_align;
    int rx_pool_jumbo;             /* rx mbufs from the jumbo pool (no scatter, MTU above 2 KiB) */
} pk_dpdk_port_setup;
void pk_dpdk_port_get_setup(const pk_dpdk_port *p, pk_dpdk_port_setup *out);
/* n descriptors fitted to a device's limits (clamped to nb_min..nb_max, a multiple of nb_align). */
uint16_t pk_dpdk_desc_fit(uint16_t n, uint16_t nb_min, uint16_t nb_max, uint16_t nb_align);
/* No frame asks the device for a tx offload from now on: engines built on the port after this and
 * pkd_tx_csum sum in software (PERFKIT_DPDK_CSUM=sw, tests). */
void pk_dpdk_port_tx_offloads_unused(pk_dpdk_port *p);
/* A fresh rte_eth_dev_info_get of the port, in the same shape (nothing chosen: queues, rss,
 * offloads, mtu, nb_rxd/txd zero). 0, or -1. */
int pk_dpdk_port_dev_info(const pk_dpdk_port *p, pk_dpdk_port_setup *out);
int pk_dpdk_port_rss(const pk_dpdk_port *p);
/* 1 link up, 0 down (memif: until the peer has connected), -1 unknown. */
int pk_dpdk_port_link(const pk_dpdk_port *p);
/* memif, link down and no engine on it: drop the control connection and connect again
 * (stop + start). 0, or -1 + err (start failed: nothing listens on the socket, or the server
 * refused: it still holds the old connection; the caller may try again). */
int pk_dpdk_port_reconnect(pk_dpdk_port *p, char *err, size_t errlen);
/* Drain, stop, close and hot-unplug. Never while an engine uses the port. */
void pk_dpdk_port_close(pk_dpdk_port *p);
int pk_dpdk_port_id(const pk_dpdk_port *p);
const char *pk_dpdk_port_name(const pk_dpdk_port *p);
void pk_dpdk_port_mac(const pk_dpdk_port *p, uint8_t mac[6]);
/* The port's own IPv4 address (network order), answered for ARP and ICMP echo. */
void pk_dpdk_port_set_ip(pk_dpdk_port *p, uint32_t ip);
int pk_dpdk_port_busy(const pk_dpdk_port *p);
/* The PMD's counters (rte_eth_stats_get): ipackets, opackets, ierrors, oerrors, imissed. */
int pk_dpdk_port_stats(const pk_dpdk_port *p, uint64_t out[5]);
/* af_packet and af_xdp: frames the kernel dropped because the port's receiver fell behind
 * (af_packet's tp_drops, af_xdp's rx_ring_full), which DPDK 22.11 leaves out of imissed;
 * since the port opened. The engines' nic_imissed is the PMD's imissed plus this. 0 for
 * other ports. */
uint64_t pk_dpdk_port_kernel_missed(pk_dpdk_port *p);
/* The port's NIC counters as every engine reports them (nic_ierrors, nic_oerrors,
 * nic_imissed, nic_ipackets, nic_opackets, before taking a base): the PMD's ierrors,
 * oerrors, imissed plus kernel_missed, ipackets, opackets. 0, or -1 when the PMD does not
 * answer. */
#define PK_NIC_N 5
int pk_dpdk_port_nic(pk_dpdk_port *p, uint64_t out[PK_NIC_N]);
/* 1 for a port whose frames come from a Linux stack (af_packet, af_xdp, tap). */
int pk_dpdk_port_kernel(const pk_dpdk_port *p);
/* Raw frames from the calling thread, for tests and diagnostics; -1 while an
 * engine uses the port. send: n frames packed in buf with their lengths; returns
 * how many the port took. recv: up to max frames into buf (cap bytes), lengths
 * in lens (a frame longer than the room left is cut); returns how many. */
int pk_dpdk_port_send(pk_dpdk_port *p, const uint8_t *buf, const uint32_t *lens, int n);
int pk_dpdk_port_recv(pk_dpdk_port *p, uint8_t *buf, size_t cap, uint32_t *lens, int max);
/* send, with csum: each IPv4 frame's IPv4 and UDP/TCP checksums filled in, by the device where
 * the port enabled that tx offload, else in software (pkd_tx_csum). */
int pk_dpdk_port_send_csum(pk_dpdk_port *p, const uint8_t *buf, const uint32_t *lens, int n, int csum);

/* --------------------------------------------------------------- engine */

typedef struct pk_dpdk_engine pk_dpdk_engine;

/* Check the workers and allocate everything they need; nothing runs yet.
 * The ports stay the caller's: they must outlive the engine. */
pk_dpdk_engine *pk_dpdk_create(pk_dpdk_port *const *ports, int nports,
                               const pk_dpdk_worker_cfg *cfgs, int n, char *err, size_t errlen);
int pk_dpdk_start(pk_dpdk_engine *e, char *err, size_t errlen);
void pk_dpdk_stop(pk_dpdk_engine *e);
int pk_dpdk_running(const pk_dpdk_engine *e);
/* Wait for every worker (all are time-bounded), then settle loss accounting. */
void pk_dpdk_join(pk_dpdk_engine *e);
void pk_dpdk_snapshot(const pk_dpdk_engine *e, int worker, uint64_t *counters, uint64_t *hist);
/* GEN: a new target rate (frames/s; 0 = as fast as the port takes them), from any thread while
 * it runs: written into the worker's control slot (the rate, then a generation counter; no
 * lock), picked up by the worker at its next burst, which re-bases its pacer there (no
 * catch-up burst; a ramp ends). 0, or -1: not a generator, or rate out of 0..1e10. */
int pk_dpdk_set_rate(pk_dpdk_engine *e, int worker, double rate);
/* RXONLY, tests only: a new rx_cap (frames/s, 0 = none) through the same control slot, counted
 * from when the worker takes it (a receiver whose capacity changes mid-run). 0, or -1. */
int pk_dpdk_set_rx_cap(pk_dpdk_engine *e, int worker, double cap);
/* GEN: frames sent per flow (= next sequence numbers); returns flows copied. */
int pk_dpdk_flow_sent(const pk_dpdk_engine *e, int worker, uint64_t *out, uint32_t n);
/* After join, a port's first receiver (its flow table's owner): how many load flows had at least
 * one frame in (BiTester's growing flows: all flows_max of them); -1 for other workers. */
int64_t pk_dpdk_flows_seen(const pk_dpdk_engine *e, int worker);
/* GEN: the destination MAC it used (after ARP); 0 = resolved/known, 1 = broadcast fallback, -1 n/a. */
int pk_dpdk_dst_mac(const pk_dpdk_engine *e, int worker, uint8_t mac[6]);
/* After join, a receiver whose sender ran elsewhere (another process): what the
 * sender sent per flow id; what never arrived is added to seq_lost. The worker
 * must be its port's first receiver (the flow table's owner). 0 or -1. */
int pk_dpdk_settle_remote(pk_dpdk_engine *e, int worker, const uint64_t *sent, uint32_t n);
/* The latency probes' histogram of a receiving worker. */
void pk_dpdk_probe_hist(const pk_dpdk_engine *e, int worker, uint64_t *hist);
const char *pk_dpdk_error(const pk_dpdk_engine *e);
/* Stop, join, release the ports for other users. */
void pk_dpdk_destroy(pk_dpdk_engine *e);

/* ------------------------------------------ hooks for other engines (tcp_engine.c) */

struct rte_mempool;
/* The process-wide mbuf pool (NULL before EAL init). */
struct rte_mempool *pk_dpdk_pool(void);
/* The port's own IPv4 address (network order; 0 = none). */
uint32_t pk_dpdk_port_ip(const pk_dpdk_port *p);
/* Take the port for one engine: 0, or -1 when another engine has it. */
int pk_dpdk_port_claim(pk_dpdk_port *p);
void pk_dpdk_port_release(pk_dpdk_port *p);
/* A worker polls the port from its first burst (begin, called before its thread starts) to its
 * last (end): while it polls a connected memif port, the memif PMD's control handling (which
 * unmaps the shared rings when the peer leaves) waits (see "memif: the peer leaving"). */
void pk_dpdk_port_poll_begin(pk_dpdk_port *p);
void pk_dpdk_port_poll_end(pk_dpdk_port *p);
/* From a polling worker every ~100 ms, outside its bursts: moved = frames it has received and
 * sent so far. Idle since the last call: the memif control runs for a moment. */
void pk_dpdk_port_poll_idle(pk_dpdk_port *p, uint16_t queue, uint64_t moved);
/* May a worker burst on p? Not on a memif port that is down (its handshake may be under way).
 * Once it says yes, a worker may go on bursting without asking until it next calls
 * pk_dpdk_port_poll_idle: the control that would change the port waits till then. */
int pk_dpdk_port_burst_ok(pk_dpdk_port *p);
/* Tests: 1 while EAL's interrupt thread is held still for a polled memif port, else 0. */
int pk_dpdk_ctl_parked(void);

#endif
