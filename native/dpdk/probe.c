/* meson's check that the libdpdk found is usable: the headers perfkit's DPDK engine includes
 * compile, and the calls it makes (EAL, ethdev with the 21.11 RTE_ETH_* names, mbuf pools,
 * rings, device probes) link. Never run. */
#include <rte_alarm.h>
#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

int main(int argc, char **argv)
{
    if (rte_eal_init(argc, argv) < 0)
        return rte_errno;
    struct rte_mempool *mp = rte_pktmbuf_pool_create("probe", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    struct rte_ring *r = rte_ring_create("probe", 64, 0, 0);
    uint64_t offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM;
    return (int)rte_eth_dev_count_avail() + rte_dev_probe("net_null0") + (mp == NULL) + (r == NULL)
           + (int)(offloads & 0) + (int)(rte_get_tsc_hz() == 0) + (int)rte_lcore_id() * 0;
}
