/* Test driver for the request reader of native/include/perfkit/http1.h (a server's
 * side): reads records from stdin, feeds each byte stream to the reader in the given
 * pieces through a buffer of exactly CAP bytes on the heap (ASan sees any read past
 * it), dropping each whole request as a server does, and prints what it made.
 * record: u32 len, u32 npieces, u32 piece_len[npieces], len bytes.
 * output: one line per record: the results in order (a request's length, or minus
 * the status to answer), then 0 if the stream ended inside a request. */
#include <stdio.h>
#include <stdlib.h>

#include "perfkit/http1.h"

#define CAP 8192

static int read_exact(void *p, size_t n)
{
    return fread(p, 1, n, stdin) == n;
}

int main(void)
{
    uint32_t len, npieces;
    char *buf = malloc(CAP);
    if (!buf)
        return 2;
    while (read_exact(&len, 4) && read_exact(&npieces, 4)) {
        uint32_t *pieces = malloc(sizeof(uint32_t) * (npieces ? npieces : 1));
        char *data = malloc(len ? len : 1);
        if (!pieces || !data || !read_exact(pieces, 4 * (size_t)npieces) || !read_exact(data, len))
            return 2;
        pk_http_req q;
        pk_http_req_init(&q);
        uint32_t have = 0; /* bytes in buf */
        size_t off = 0;    /* bytes of data taken */
        long r = 0;
        int stop = 0;
        for (uint32_t i = 0; i < npieces && !stop; i++) {
            size_t left = pieces[i];
            while (!stop && left > 0 && off < len) {
                size_t n = left < len - off ? left : len - off;
                if (n > CAP - have)
                    n = CAP - have;
                if (n == 0)
                    return 3; /* a full buffer the reader left undecided */
                memcpy(buf + have, data + off, n);
                have += (uint32_t)n;
                off += n;
                left -= n;
                while ((r = pk_http_req_parse(&q, buf, have, CAP)) != 0) {
                    printf("%ld ", r);
                    if (r < 0) {
                        stop = 1;
                        break;
                    }
                    if (r > have)
                        return 4;
                    memmove(buf, buf + r, have - (uint32_t)r);
                    have -= (uint32_t)r;
                    pk_http_req_init(&q);
                }
            }
        }
        if (!stop)
            printf("0");
        printf("\n");
        free(pieces);
        free(data);
    }
    free(buf);
    return 0;
}
