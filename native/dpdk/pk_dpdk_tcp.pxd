# Cython declarations for perfkit's DPDK TCP (tcp_engine.h).
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from pk_dpdk cimport pk_dpdk_port

cdef extern from "tcp_engine.h":
    enum pk_tcp_role:
        PK_TCP_SERVER
        PK_TCP_CLIENT

    enum: PK_TCP_MAX_RANGES
    enum: PK_TCP_MAX_OWN
    enum: PK_TCP_MAX_DIPS

    ctypedef struct pk_tcp_cfg:
        int role
        uint32_t ip
        uint32_t server_ip
        uint32_t gateway_ip
        uint8_t gateway_mac[6]
        int gateway_mac_set
        uint32_t client_first[8]
        uint32_t client_num[8]
        int nranges
        int ipv6
        uint8_t ip6[16]
        uint8_t server_ip6[16]
        uint8_t gateway_ip6[16]
        uint8_t client6_hi[12]
        uint16_t listen, listen_num
        uint16_t lport_lo, lport_hi
        uint16_t mss
        uint8_t tos
        uint16_t vlan
        int tcp_rst
        uint64_t rto_ns
        uint32_t retries
        uint32_t burst
        uint64_t duration_ns
        const uint8_t *msg
        uint32_t msg_len
        int keepalive
        double cps
        uint64_t cc
        uint64_t ka_interval_ns
        uint32_t ka_requests
        uint32_t launch_num
        uint64_t slow_start_ns, wait_ns
        int fast_close
        int flood
        int cpu
        uint16_t queue
        uint32_t own_first[2]
        uint32_t own_num[2]
        uint8_t own6_hi[2][12]
        int nown
        int disable_ack
        int raw
        int udp
        uint32_t pipeline
        const uint32_t *dips
        const uint8_t *dips6
        uint32_t ndips
        int vxlan
        uint32_t vni
        uint8_t inner_smac[6]
        uint8_t inner_dmac[6]
        uint32_t vtep_local
        uint32_t vtep_remote

    ctypedef struct pk_tcp_engine:
        pass
    pk_tcp_engine *pk_tcp_create(pk_dpdk_port *port, const pk_tcp_cfg *cfg, char *err, size_t errlen)
    int pk_tcp_start(pk_tcp_engine *e, char *err, size_t errlen)
    void pk_tcp_stop(pk_tcp_engine *e) nogil
    int pk_tcp_running(const pk_tcp_engine *e) nogil
    void pk_tcp_join(pk_tcp_engine *e) nogil
    void pk_tcp_nic_last(pk_tcp_engine *e) nogil
    void pk_tcp_snapshot(const pk_tcp_engine *e, uint64_t *counters, uint64_t *hist) nogil
    const char *pk_tcp_error(const pk_tcp_engine *e)
    void pk_tcp_destroy(pk_tcp_engine *e) nogil
