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
