# cython: language_level=3
"""DPDK build probe: proves the extension links against libdpdk.

The DPDK engine itself (EAL, ports, UDP flows) is issue 5; until it lands this
module only reports the DPDK version it was built against.
"""

cdef extern from "rte_version.h":
    const char *rte_version()


def version():
    """The DPDK version string this extension was built against."""
    return rte_version().decode()
