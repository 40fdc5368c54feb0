# Cython declarations for perfkit's DPDK engine (dpdk_engine.h).
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int64_t

cdef extern from "dpdk_engine.h":
    enum pk_dpdk_role:
        PK_DPDK_GEN
        PK_DPDK_RXONLY
        PK_DPDK_REVERSE
        PK_DPDK_FORWARD
        PK_DPDK_NROLES

    ctypedef struct pk_dpdk_worker_cfg:
        int role
        int port
        int peer
        int track
        uint32_t size
        uint32_t flows
        uint32_t burst
        double rate
        uint64_t duration_ns
        uint8_t dst_mac[6]
        int dst_mac_set
        uint32_t dst_ip
        uint16_t sport
        uint16_t dport
        int cpu
        uint32_t drop_every
        uint32_t src_ips, dst_ips, sports, dports
        uint16_t sizes[1024]
        uint32_t nsizes
        double rate_end
        uint64_t ramp_ns
        uint16_t queue
        uint32_t flow_first
        double probe_rate
        uint32_t probe_size
        int out_port
        int with_worker
        uint64_t pause_ns
        uint32_t flows_start
        double flow_rate
        double rx_cap
        int peer_back
        uint64_t count

    enum: PK_DPDK_MAX_PATTERN
    enum: PK_DPDK_MAX_QUEUES
    enum: PK_DPDK_MAX_WORKERS
    enum: PK_DPDK_MAX_FLOWS
    enum: PK_DPDK_MAX_BURST
    enum: PK_DPDK_MIN_SIZE
    enum: PK_DPDK_MAX_SIZE
    enum: PK_DPDK_MAX_JUMBO

    int pk_dpdk_eal_init(int argc, const char *const *argv, uint32_t nb_mbufs, char *err, size_t errlen) nogil
    int pk_dpdk_eal_state()
    void pk_dpdk_pool_counts(uint32_t *size, uint32_t *avail)
    int pk_dpdk_ports_open()
    int pk_dpdk_ctl_parked()
    int pk_dpdk_ethdev_count()
    uint64_t pk_dpdk_tsc_hz()

    ctypedef struct pk_dpdk_port:
        pass
    pk_dpdk_port *pk_dpdk_port_open(const char *dev, const char *netns, char *err, size_t errlen) nogil
    pk_dpdk_port *pk_dpdk_port_open_q(const char *dev, const char *netns, int nq, char *err, size_t errlen) nogil
    int pk_dpdk_port_queues(const pk_dpdk_port *p)
    int pk_dpdk_port_rss(const pk_dpdk_port *p)
    int pk_dpdk_port_link(const pk_dpdk_port *p)
    int pk_dpdk_port_reconnect(pk_dpdk_port *p, char *err, size_t errlen) nogil
    void pk_dpdk_port_close(pk_dpdk_port *p) nogil
    int pk_dpdk_port_id(const pk_dpdk_port *p)
    const char *pk_dpdk_port_name(const pk_dpdk_port *p)
    void pk_dpdk_port_mac(const pk_dpdk_port *p, uint8_t *mac)
    void pk_dpdk_port_set_ip(pk_dpdk_port *p, uint32_t ip)
    int pk_dpdk_port_busy(const pk_dpdk_port *p)
    int pk_dpdk_port_stats(const pk_dpdk_port *p, uint64_t *out)
    uint64_t pk_dpdk_port_kernel_missed(pk_dpdk_port *p)
    int pk_dpdk_port_send(pk_dpdk_port *p, const uint8_t *buf, const uint32_t *lens, int n)
    int pk_dpdk_port_recv(pk_dpdk_port *p, uint8_t *buf, size_t cap, uint32_t *lens, int max)
    int pk_dpdk_port_send_csum(pk_dpdk_port *p, const uint8_t *buf, const uint32_t *lens, int n, int csum)
    pk_dpdk_port *pk_dpdk_port_open_cfg(const char *dev, const char *netns, int nq, int mtu, char *err,
                                        size_t errlen) nogil
    ctypedef struct pk_dpdk_port_setup:
        char driver[32]
        uint16_t queues, max_rx_queues, max_tx_queues
        int rss, rss_key
        uint8_t hash_key_size
        uint64_t rss_hf, flow_type_rss_offloads
        uint64_t rx_offload_capa, tx_offload_capa, rx_offloads, tx_offloads
        uint32_t mtu, mtu_asked, min_mtu, max_mtu, max_rx_pktlen
        uint16_t nb_rxd, nb_txd
        uint16_t rx_desc_min, rx_desc_max, rx_desc_align, tx_desc_min, tx_desc_max, tx_desc_align
        int rx_pool_jumbo
    void pk_dpdk_port_get_setup(const pk_dpdk_port *p, pk_dpdk_port_setup *out)
    void pk_dpdk_port_tx_offloads_unused(pk_dpdk_port *p)
    uint16_t pk_dpdk_desc_fit(uint16_t n, uint16_t nb_min, uint16_t nb_max, uint16_t nb_align)
    int pk_dpdk_port_dev_info(const pk_dpdk_port *p, pk_dpdk_port_setup *out)

    ctypedef struct pk_dpdk_engine:
        pass
    pk_dpdk_engine *pk_dpdk_create(pk_dpdk_port *const *ports, int nports,
                                   const pk_dpdk_worker_cfg *cfgs, int n, char *err, size_t errlen)
    int pk_dpdk_start(pk_dpdk_engine *e, char *err, size_t errlen)
    void pk_dpdk_stop(pk_dpdk_engine *e) nogil
    int pk_dpdk_running(const pk_dpdk_engine *e) nogil
    void pk_dpdk_join(pk_dpdk_engine *e) nogil
    void pk_dpdk_snapshot(const pk_dpdk_engine *e, int worker, uint64_t *counters, uint64_t *hist) nogil
    int pk_dpdk_set_rate(pk_dpdk_engine *e, int worker, double rate)
    int64_t pk_dpdk_flows_seen(const pk_dpdk_engine *e, int worker)
    int pk_dpdk_set_rx_cap(pk_dpdk_engine *e, int worker, double cap)
    int pk_dpdk_flow_sent(const pk_dpdk_engine *e, int worker, uint64_t *out, uint32_t n) nogil
    int pk_dpdk_dst_mac(const pk_dpdk_engine *e, int worker, uint8_t *mac)
    int pk_dpdk_settle_remote(pk_dpdk_engine *e, int worker, const uint64_t *sent, uint32_t n) nogil
    void pk_dpdk_probe_hist(const pk_dpdk_engine *e, int worker, uint64_t *hist) nogil
    const char *pk_dpdk_error(const pk_dpdk_engine *e)
    void pk_dpdk_destroy(pk_dpdk_engine *e) nogil
