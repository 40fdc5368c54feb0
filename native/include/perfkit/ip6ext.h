/* IPv6 extension headers (RFC 8200 4): the bounded walk from the fixed header's Next Header
 * to the upper-layer header, for the DPDK engines' receive paths.
 *
 * Walked: Hop-by-Hop Options (0, first only), Routing (43), Destination Options (60), each
 * with its length field checked against the payload. Not walked further (perfkit is an end
 * host for load tests, not a router, and reassembles nothing):
 *   - Fragment (44): every fragment, the first included; its payload is never taken as TCP
 *     or ICMPv6 (atomic fragments too: Linux sends none since RFC 8021);
 *   - Routing with Segments Left > 0: the packet is not at its final destination yet;
 *   - an option whose type asks for the packet to be discarded when unknown (its two high
 *     bits not 00, RFC 8200 4.2; Pad1, PadN and the 00 options such as Router Alert pass).
 * The chain is limited to PK_IP6_EXT_MAX headers and PK_IP6_EXT_BYTES bytes: no peer of
 * a load test sends longer ones, and the walk's cost per packet stays bounded. */
#ifndef PERFKIT_IP6EXT_H
#define PERFKIT_IP6EXT_H

#include <stdint.h>

#define PK_IP6_EXT_MAX   8          /* extension headers walked at most */
#define PK_IP6_EXT_BYTES 1024       /* their bytes at most */

enum {
    PK_IP6_UPPER = 0,   /* reached a header that is not walked here: TCP, ICMPv6, UDP, 59, ESP... */
    PK_IP6_SKIP  = 1,   /* well formed, not for perfkit (fragment, segments left, discard option) */
    PK_IP6_BAD   = 2,   /* cut, Hop-by-Hop not first, an option past its header, past the limits */
};

static inline int pk_ip6_is_ext(uint8_t nh) { return nh == 0 || nh == 43 || nh == 44 || nh == 60; }

/* The options area o[0..n) of a Hop-by-Hop or Destination Options header. */
static inline int pk_ip6_opts(const uint8_t *o, uint32_t n)
{
    for (uint32_t i = 0; i < n;) {
        if (o[i] == 0) {            /* Pad1: one byte, no length */
            i++;
            continue;
        }
        if (n - i < 2 || o[i + 1] > n - i - 2)
            return PK_IP6_BAD;
        if (o[i] != 1 && (o[i] >> 6) != 0)
            return PK_IP6_SKIP;     /* unknown to us, and its type says discard */
        i += 2u + o[i + 1];
    }
    return PK_IP6_UPPER;
}

/* ip: the fixed header, whose plen payload bytes the caller has checked lie in the frame.
 * On PK_IP6_UPPER, *nh is the upper-layer protocol and *off the extension headers' length
 * (the upper layer starts at ip + 40 + *off and has plen - *off bytes: the length the
 * pseudo header of its checksum takes, RFC 8200 8.1). The destination address at ip + 24
 * is the final one: a Routing header with segments left is never walked past. */
static inline int pk_ip6_walk(const uint8_t *ip, uint32_t plen, uint8_t *nh, uint32_t *off)
{
    const uint8_t *p = ip + 40;
    uint8_t t = ip[6];
    uint32_t o = 0;
    for (int k = 0; pk_ip6_is_ext(t); k++) {
        if (k == PK_IP6_EXT_MAX || (t == 0 && k > 0) || plen - o < 8)
            return PK_IP6_BAD;
        const uint8_t *h = p + o;
        if (t == 44)
            return PK_IP6_SKIP;     /* 8 bytes, present: a fragment, not reassembled */
        uint32_t hl = 8u + 8u * h[1];
        if (hl > plen - o || o + hl > PK_IP6_EXT_BYTES)
            return PK_IP6_BAD;
        if (t == 43) {
            if (h[3] != 0)          /* Segments Left: not there yet */
                return PK_IP6_SKIP;
        } else {
            int r = pk_ip6_opts(h + 2, hl - 2);
            if (r != PK_IP6_UPPER)
                return r;
        }
        t = h[0];
        o += hl;
    }
    *nh = t;
    *off = o;
    return PK_IP6_UPPER;
}

#endif
