/* The physical limits perfkit's DPDK engine is measured against (bench/run.py builds
 * this with `cc -O2 dpdk_bare.c $(pkg-config --cflags --libs libdpdk)`).
 *
 *   dpdk_bare EAL-ARGS... -- txonly SECONDS     port 0: a bare rte_eth_tx_burst loop
 *   dpdk_bare EAL-ARGS... -- txcopy SECONDS     the same, copying a 60-byte frame into each mbuf
 *   dpdk_bare EAL-ARGS... -- macswap SECONDS    port 0: rx_burst, swap MACs, IPv4
 *                                               addresses and UDP ports, tx_burst back;
 *                                               ends 1 s after the frames stop
 *   dpdk_bare EAL-ARGS... -- iofwd SECONDS      ports 0 and 1: testpmd's io forward on one
 *                                               lcore: rx_burst on one port, tx_burst of
 *                                               the same mbufs on the other, both ways
 *
 * The port (iofwd: two ports) comes from --vdev in the EAL arguments (the same EAL options perfkit uses).
 * txonly: allocate a burst of 60-byte mbufs from the pool (contents left as they are:
 * the least a sender can do), hand them to the PMD, free what it refused. macswap: what
 * testpmd's macswap does, plus the IP and port swap perfkit's reflector makes, so
 * perfkit's generator accepts the frames coming back; like perfkit's workers it yields
 * its CPU after 256 empty polls. Prints one JSON line of counts.
 * Every loop is bounded by SECONDS (TSC). */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#define BURST 32
#define NB_MBUF 16383
#define RING 1024
#define IDLE_YIELD 256   /* as perfkit's workers: after this many empty polls, yield the CPU */

static int port_up(uint16_t port, struct rte_mempool *mp)
{
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof(conf));
    if (rte_eth_dev_configure(port, 1, 1, &conf) != 0)
        return -1;
    if (rte_eth_rx_queue_setup(port, 0, RING, rte_eth_dev_socket_id(port), NULL, mp) != 0)
        return -1;
    if (rte_eth_tx_queue_setup(port, 0, RING, rte_eth_dev_socket_id(port), NULL) != 0)
        return -1;
    return rte_eth_dev_start(port);
}

static inline void swap(uint8_t *a, uint8_t *b, unsigned n)
{
    uint8_t t[6];
    memcpy(t, a, n);
    memcpy(a, b, n);
    memcpy(b, t, n);
}

int main(int argc, char **argv)
{
    int used = rte_eal_init(argc, argv);
    if (used < 0) {
        fprintf(stderr, "dpdk_bare: rte_eal_init failed\n");
        return 1;
    }
    argc -= used;
    argv += used;
    if (argc < 3 || (strcmp(argv[1], "txonly") && strcmp(argv[1], "txcopy") && strcmp(argv[1], "macswap") &&
                     strcmp(argv[1], "iofwd"))) {
        fprintf(stderr, "usage: dpdk_bare EAL-ARGS -- txonly|txcopy|macswap|iofwd SECONDS\n");
        return 2;
    }
    int io_fwd = strcmp(argv[1], "iofwd") == 0;
    int tx_copy = strcmp(argv[1], "txcopy") == 0;
    int tx_only = tx_copy || strcmp(argv[1], "txonly") == 0;
    /* a broadcast Ethernet + IPv4 + UDP frame, as txcopy writes it (contents fixed) */
    static const uint8_t tmpl[60] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00,
                                     0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
                                     0x27, 0x10, 0, 9, 0, 26, 0, 0};
    double secs = atof(argv[2]);
    if (!(secs > 0 && secs <= 600)) {
        fprintf(stderr, "dpdk_bare: SECONDS must be in (0, 600]\n");
        return 2;
    }
    if (rte_eth_dev_count_avail() < 1) {
        fprintf(stderr, "dpdk_bare: no port (give --vdev)\n");
        return 1;
    }
    struct rte_mempool *mp = rte_pktmbuf_pool_create("bare", NB_MBUF, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                                     rte_socket_id());
    if (!mp || port_up(0, mp) != 0) {
        fprintf(stderr, "dpdk_bare: port 0 did not start\n");
        return 1;
    }
    if (io_fwd && (rte_eth_dev_count_avail() < 2 || port_up(1, mp) != 0)) {
        fprintf(stderr, "dpdk_bare: iofwd needs a second port (two --vdev)\n");
        return 1;
    }
    struct rte_mbuf *b[BURST];
    uint64_t tx = 0, rx = 0, refused = 0;
    const uint64_t hz = rte_get_tsc_hz(), t0 = rte_rdtsc(), end = t0 + (uint64_t)(secs * hz);
    uint64_t last = t0, iter = 0, last_rx = t0;
    uint32_t idle = 0;
    if (io_fwd) {
        /* testpmd's io forward, both directions on this lcore: what one port receives
         * leaves by the other, untouched; what the tx queue refuses is freed */
        for (;;) {
            if ((++iter & 255) == 0 && (last = rte_rdtsc()) >= end)
                break;
            uint16_t moved = 0;
            for (uint16_t from = 0; from < 2; from++) {
                uint16_t n = rte_eth_rx_burst(from, 0, b, BURST);
                if (!n)
                    continue;
                moved += n;
                rx += n;
                uint16_t s = rte_eth_tx_burst(1 - from, 0, b, n);
                tx += s;
                if (s < n) {
                    refused += n - s;
                    rte_pktmbuf_free_bulk(b + s, n - s);
                }
            }
            if (moved)
                idle = 0;
            else if (++idle >= IDLE_YIELD) {
                idle = 0;
                sched_yield();
            }
        }
    } else if (tx_only) {
        for (;;) {
            if ((++iter & 255) == 0 && (last = rte_rdtsc()) >= end)
                break;
            if (rte_pktmbuf_alloc_bulk(mp, b, BURST) != 0)
                continue;
            for (int i = 0; i < BURST; i++) {
                b[i]->data_len = b[i]->pkt_len = 60;
                if (tx_copy)
                    memcpy(rte_pktmbuf_mtod(b[i], uint8_t *), tmpl, sizeof(tmpl));
            }
            uint16_t n = rte_eth_tx_burst(0, 0, b, BURST);
            tx += n;
            if (n < BURST) {
                refused += BURST - n;
                rte_pktmbuf_free_bulk(b + n, BURST - n);
            }
        }
    } else {
        for (;;) {
            if ((++iter & 255) == 0 && (last = rte_rdtsc()) >= end)
                break;
            uint16_t n = rte_eth_rx_burst(0, 0, b, BURST);
            if (!n) {
                if (++idle >= IDLE_YIELD) {   /* a partner polling on this CPU gets to run */
                    idle = 0;
                    sched_yield();
                }
                /* the generator has come and gone: 1 s without frames ends the loop */
                if (rx && (iter & 255) == 0 && last - last_rx > hz)
                    break;
                continue;
            }
            rx += n;
            last_rx = last;
            idle = 0;
            uint16_t k = 0;
            for (uint16_t i = 0; i < n; i++) {
                uint8_t *p = rte_pktmbuf_mtod(b[i], uint8_t *);
                /* Ethernet + IPv4 (no options) + UDP, in the first segment: else drop */
                if (b[i]->data_len < 42 || p[12] != 0x08 || p[13] != 0x00 || p[14] != 0x45 || p[23] != 17) {
                    rte_pktmbuf_free(b[i]);
                    continue;
                }
                swap(p, p + 6, 6);
                swap(p + 26, p + 30, 4);
                swap(p + 34, p + 36, 2);
                b[k++] = b[i];
            }
            uint16_t s = k ? rte_eth_tx_burst(0, 0, b, k) : 0;
            tx += s;
            if (s < k) {
                refused += k - s;
                rte_pktmbuf_free_bulk(b + s, k - s);
            }
        }
    }
    double took = (double)(last - t0) / (double)hz;
    printf("{\"mode\": \"%s\", \"tx\": %" PRIu64 ", \"rx\": %" PRIu64 ", \"refused\": %" PRIu64
           ", \"seconds\": %.6f, \"tx_pps\": %.1f}\n",
           argv[1], tx, rx, refused, took, took > 0 ? tx / took : 0.0);
    fflush(stdout);
    for (uint16_t p = 0; p < (io_fwd ? 2 : 1); p++) {
        rte_eth_dev_stop(p);
        rte_eth_dev_close(p);
    }
    rte_eal_cleanup();
    return 0;
}
