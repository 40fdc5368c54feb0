/* The Internet checksum (RFC 1071) pieces both DPDK engines use: a one's complement sum of
 * 16-bit words as they lie in memory, and its fold to 16 bits. The sum is byte-order
 * independent: store the folded result as is. */
#ifndef PERFKIT_CSUM_H
#define PERFKIT_CSUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t sum16(const void *buf, size_t len, uint64_t sum)
{
    const uint8_t *p = buf;
    /* 8 bytes a step: a 64-bit word's two 32-bit halves added as numbers (2^16 = 1 modulo
     * 2^16 - 1, so a half sums as its two 16-bit words do, in either byte order); each step
     * adds under 2^33, so the sum cannot overflow for any frame */
    while (len >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        sum += (x & 0xffffffffu) + (x >> 32);
        p += 8;
        len -= 8;
    }
    while (len > 1) {
        uint16_t x;
        memcpy(&x, p, 2);
        sum += x;
        p += 2;
        len -= 2;
    }
    if (len) {
        uint16_t x = 0;
        memcpy(&x, p, 1);
        sum += x;
    }
    return sum;
}

static inline uint16_t fold(uint64_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

#endif
