/* The header perfkit puts at the start of every UDP test payload.
 *
 * Host byte order: both ends of a socket-engine test run on one host (or on
 * perfkit peers of the same build). A payload shorter than the header carries
 * no header: such runs count packets and bytes but not loss or latency.
 */
#ifndef PERFKIT_WIRE_H
#define PERFKIT_WIRE_H

#include <stdint.h>
#include <string.h>

#define PK_WIRE_MAGIC 0x706b7431u /* "pkt1" */

typedef struct pk_wire_hdr {
    uint32_t magic;
    uint32_t flow;   /* flow id, 0 .. flows-1 */
    uint64_t seq;    /* per-flow sequence number, from 0 */
    uint64_t tx_ns;  /* sender's CLOCK_MONOTONIC at send */
} pk_wire_hdr;

#define PK_WIRE_HDR_LEN ((uint32_t)sizeof(pk_wire_hdr))

/* Parse a received payload; returns 0 when it is not a valid perfkit header.
 * Bounds-checked: reads nothing past len. */
static inline int pk_wire_parse(const void *buf, uint64_t len, pk_wire_hdr *out)
{
    if (len < PK_WIRE_HDR_LEN)
        return 0;
    memcpy(out, buf, PK_WIRE_HDR_LEN);
    return out->magic == PK_WIRE_MAGIC;
}

#endif
