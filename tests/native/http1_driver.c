/* Test driver for native/include/perfkit/http1.h: reads records from stdin,
 * feeds each response to the parser in the given pieces, prints what it made.
 * record: u32 len, u32 npieces, u32 piece_len[npieces], u8 head, len bytes.
 * output: one line per record: state status body_bytes consumed keep_alive error */
#include <stdio.h>
#include <stdlib.h>

#include "perfkit/http1.h"

static int read_exact(void *p, size_t n)
{
    return fread(p, 1, n, stdin) == n;
}

int main(void)
{
    static pk_http_resp r;
    uint32_t len, npieces;
    while (read_exact(&len, 4) && read_exact(&npieces, 4)) {
        uint32_t *pieces = malloc(sizeof(uint32_t) * (npieces ? npieces : 1));
        unsigned char head;
        char *data = malloc(len ? len : 1);
        if (!pieces || !data || !read_exact(pieces, 4 * (size_t)npieces) || !read_exact(&head, 1) ||
            !read_exact(data, len))
            return 2;
        pk_http_resp_init(&r, head);
        size_t off = 0, consumed = 0;
        for (uint32_t i = 0; i < npieces && off < len; i++) {
            size_t n = pieces[i] < len - off ? pieces[i] : len - off;
            /* each piece in its own heap block, so ASan sees any read past it */
            char *piece = malloc(n ? n : 1);
            memcpy(piece, data + off, n);
            size_t used = pk_http_resp_feed(&r, piece, n);
            free(piece);
            if (used > n)
                return 3;
            consumed += used;
            off += n;
            if (r.state == PK_HTTP_DONE || r.state == PK_HTTP_ERROR)
                break;
        }
        if (off >= len && r.state != PK_HTTP_DONE && r.state != PK_HTTP_ERROR)
            pk_http_resp_eof(&r);
        printf("%d %d %llu %zu %d %s\n", r.state, r.status, (unsigned long long)r.body_bytes, consumed,
               r.keep_alive, r.error ? r.error : "-");
        free(pieces);
        free(data);
    }
    return 0;
}
