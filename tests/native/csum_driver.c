/* Reads records (u32 length, u32 start offset, u64 initial sum, the bytes) from stdin and
 * prints fold(sum16(bytes + offset, length - offset, initial)) for each: test_csum.py checks
 * it against RFC 1071 computed in Python, at every alignment and length. */
#include <stdio.h>
#include <stdlib.h>
#include "perfkit/csum.h"

int main(void)
{
    uint32_t hdr[2];
    uint64_t init;
    while (fread(hdr, 4, 2, stdin) == 2 && fread(&init, 8, 1, stdin) == 1) {
        uint8_t *b = malloc(hdr[0] ? hdr[0] : 1);
        if (!b || fread(b, 1, hdr[0], stdin) != hdr[0] || hdr[1] > hdr[0])
            return 2;
        printf("%u\n", fold(sum16(b + hdr[1], hdr[0] - hdr[1], init)));
        free(b);
    }
    return 0;
}
