# cython: language_level=3
"""The counter list and histogram layout, read from the C headers.

perfkit.stats builds its schema from here: the C X-macro list is the only
definition of the counters.
"""
from pk_common cimport (PK_NCOUNTERS, pk_counter_names, pk_counter_units,
                        pk_counter_groups, pk_counter_labels, pk_counter_kinds, PK_HIST_BUCKETS,
                        PK_HIST_SUB_BITS, pk_hist_lower, pk_hist_index,
                        PK_WIRE_HDR_LEN)

KINDS = ("sum", "gauge", "min", "max")
HIST_BUCKETS = PK_HIST_BUCKETS
HIST_SUB_BITS = PK_HIST_SUB_BITS
WIRE_HEADER_BYTES = PK_WIRE_HDR_LEN


def counter_table():
    """[(name, kind, unit, group, label)] in the order of the C list."""
    return [(pk_counter_names[i].decode(), KINDS[pk_counter_kinds[i]],
             pk_counter_units[i].decode(), pk_counter_groups[i].decode(),
             pk_counter_labels[i].decode())
            for i in range(PK_NCOUNTERS)]


def hist_lower_bounds():
    """Smallest value (ns) of each histogram bucket, as a list."""
    return [pk_hist_lower(i) for i in range(PK_HIST_BUCKETS)]


def hist_index(unsigned long long value):
    """The bucket a value (ns) lands in."""
    return pk_hist_index(value)
