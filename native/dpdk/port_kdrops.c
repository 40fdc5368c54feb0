/* perfkit's DPDK engine: drops only the kernel counts. af_packet and af_xdp ports: the
 * frames the kernel dropped because the port's receiver fell behind, which DPDK 22.11
 * leaves out of imissed (see dpdk_engine.h, pk_dpdk_port_kernel_missed). */
#define _GNU_SOURCE
#include "dpdk_internal.h"

#include <dirent.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#define PK_XDP_STATISTICS 7
struct pk_xdp_statistics {   /* linux/if_xdp.h's struct xdp_statistics */
    uint64_t rx_dropped, rx_invalid_descs, tx_invalid_descs, rx_ring_full, rx_fill_ring_empty_descs,
        tx_ring_empty_descs;
};

/* The sockets this process has open now (fds below MAX_FDS_SEEN), as a bitmap. */
void pkd_sockets_now(uint8_t *bits)
{
    memset(bits, 0, MAX_FDS_SEEN / 8);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        char path[64], link[64];
        if (fd <= 2 || fd >= MAX_FDS_SEEN || fd == dirfd(d))
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n > 7 && memcmp(link, "socket:", 7) == 0)
            bits[fd / 8] |= (uint8_t)(1u << (fd % 8));
    }
    closedir(d);
}

static int sock_family(int fd)
{
    int dom = 0;
    socklen_t len = sizeof(dom);
    return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) == 0 ? dom : -1;
}

/* After probe and queue setup (in the port's namespace): the af_packet sockets bound to its
 * interface, or the af_xdp sockets, that appeared since `before`. The PMD keeps them private;
 * they are the only place the kernel's drops of a receiver that fell behind are counted:
 * af_packet's ring full (tp_drops) and af_xdp's rx ring full (rx_ring_full), which DPDK 22.11's
 * af_packet and af_xdp leave out of imissed. */
void pkd_find_kernel_sockets(pk_dpdk_port *p, const char *dev, const uint8_t *before)
{
    int want = strncmp(p->name, "net_af_packet", 13) == 0 ? AF_PACKET
             : strncmp(p->name, "net_af_xdp", 10) == 0   ? AF_XDP : 0;
    if (!want)
        return;
    unsigned ifindex = 0;
    const char *at = strstr(dev, "iface=");
    if (at) {
        char ifname[IF_NAMESIZE] = { 0 };
        size_t n = strcspn(at + 6, ",");
        if (n < sizeof(ifname)) {
            memcpy(ifname, at + 6, n);
            ifindex = if_nametoindex(ifname);
        }
    }
    uint8_t now[MAX_FDS_SEEN / 8];
    pkd_sockets_now(now);
    for (int fd = 3; fd < MAX_FDS_SEEN && p->nkfd < PK_DPDK_MAX_QUEUES; fd++) {
        if (!(now[fd / 8] >> (fd % 8) & 1) || (before[fd / 8] >> (fd % 8) & 1) || sock_family(fd) != want)
            continue;
        if (want == AF_PACKET) {   /* bound to this port's interface */
            struct sockaddr_ll sll;
            socklen_t len = sizeof(sll);
            memset(&sll, 0, sizeof(sll));
            if (getsockname(fd, (struct sockaddr *)&sll, &len) != 0 || (unsigned)sll.sll_ifindex != ifindex)
                continue;
        }
        p->kfd[p->nkfd++] = fd;
    }
    p->kfamily = want;
    if (want == AF_PACKET) {   /* read-and-clear: start from zero */
        for (int i = 0; i < p->nkfd; i++) {
            struct tpacket_stats st;
            socklen_t len = sizeof(st);
            getsockopt(p->kfd[i], SOL_PACKET, PACKET_STATISTICS, &st, &len);
        }
    } else {
        for (int i = 0; i < p->nkfd; i++) {
            struct pk_xdp_statistics st;
            socklen_t len = sizeof(st);
            memset(&st, 0, sizeof(st));
            if (getsockopt(p->kfd[i], SOL_XDP, PK_XDP_STATISTICS, &st, &len) == 0)
                p->kxdp_base += st.rx_ring_full;
        }
    }
}

/* Frames the kernel dropped because the port's receiver did not keep up, since the port
 * opened (any thread; af_packet's read-and-clear counts are summed atomically). */
static uint64_t kernel_missed(pk_dpdk_port *p)
{
    uint64_t sum = 0;
    for (int i = 0; i < p->nkfd; i++) {
        if (p->kfamily == AF_PACKET) {
            struct tpacket_stats st;
            socklen_t len = sizeof(st);
            if (getsockopt(p->kfd[i], SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0 && st.tp_drops)
                __atomic_add_fetch(&p->ktp_drops, st.tp_drops, __ATOMIC_RELAXED);
        } else {
            struct pk_xdp_statistics st;
            socklen_t len = sizeof(st);
            memset(&st, 0, sizeof(st));
            if (getsockopt(p->kfd[i], SOL_XDP, PK_XDP_STATISTICS, &st, &len) == 0)
                sum += st.rx_ring_full;
        }
    }
    if (p->kfamily == AF_PACKET)
        return __atomic_load_n(&p->ktp_drops, __ATOMIC_RELAXED);
    return sum >= p->kxdp_base ? sum - p->kxdp_base : 0;
}

uint64_t pk_dpdk_port_kernel_missed(pk_dpdk_port *p) { return p->nkfd ? kernel_missed(p) : 0; }

int pk_dpdk_port_kernel(const pk_dpdk_port *p) { return p->kernel; }

int pk_dpdk_port_nic(pk_dpdk_port *p, uint64_t out[PK_NIC_N])
{
    struct rte_eth_stats st;
    memset(&st, 0, sizeof(st));
    if (rte_eth_stats_get(p->pid, &st) != 0)
        return -1;
    out[0] = st.ierrors;
    out[1] = st.oerrors;
    /* imissed: the PMD's, and what only the kernel counted (af_packet, af_xdp: kernel_missed) */
    out[2] = st.imissed + (p->nkfd ? kernel_missed(p) : 0);
    out[3] = st.ipackets;
    out[4] = st.opackets;
    return 0;
}
