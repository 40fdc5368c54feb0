/* Incremental HTTP/1.x response parser for load clients.
 *
 * Fed whatever bytes a read returned, in any split; it keeps only the header
 * section (at most PK_HTTP_MAX_HEADER bytes) and counts the body without
 * storing it. Content-Length, chunked transfer coding and read-until-close
 * bodies are understood. Every byte is bounds-checked: malformed or oversized
 * input ends in PK_HTTP_ERROR with a reason, never in a read past the buffer.
 *
 *   pk_http_resp r; pk_http_resp_init(&r, is_head_request);
 *   for each read: n = pk_http_resp_feed(&r, buf, len);   // bytes consumed
 *       r.state == PK_HTTP_DONE  -> r.status, r.body_bytes; the rest of buf
 *                                   (len - n) belongs to the next response
 *       r.state == PK_HTTP_ERROR -> r.error
 *   at EOF: pk_http_resp_eof(&r) ends a read-until-close body.
 * The DPDK TCP client parses on its own, byte by byte (tcp_http.c): its 64-byte sockets hold no header buffer.
 */
#ifndef PERFKIT_HTTP1_H
#define PERFKIT_HTTP1_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* per connection: 20,000 virtual users hold 160 MB of header room */
#ifndef PK_HTTP_MAX_HEADER
#define PK_HTTP_MAX_HEADER 8192
#endif
#define PK_HTTP_MAX_CHUNK_LINE 64

enum pk_http_state {
    PK_HTTP_HEADER = 0,   /* reading the status line and headers */
    PK_HTTP_BODY_LENGTH,  /* Content-Length body */
    PK_HTTP_CHUNK_SIZE,   /* chunked: reading a chunk-size line */
    PK_HTTP_CHUNK_DATA,   /* chunked: chunk data */
    PK_HTTP_CHUNK_CRLF,   /* chunked: the CRLF after chunk data */
    PK_HTTP_TRAILER,      /* chunked: trailer lines after the last chunk */
    PK_HTTP_BODY_CLOSE,   /* body runs until the connection closes */
    PK_HTTP_DONE,
    PK_HTTP_ERROR,
};

typedef struct pk_http_resp {
    int state;
    int status;             /* 100..599 */
    int keep_alive;         /* the connection may carry another request */
    int head;               /* the request was HEAD: no body */
    uint64_t remaining;     /* body or chunk bytes still to come */
    uint64_t body_bytes;    /* body bytes seen (chunked: data only) */
    uint64_t header_bytes;  /* status line + headers */
    const char *error;      /* why, in PK_HTTP_ERROR */
    uint32_t len;           /* bytes held in buf */
    char buf[PK_HTTP_MAX_HEADER];
} pk_http_resp;

static inline void pk_http_resp_init(pk_http_resp *r, int head_request)
{
    r->state = PK_HTTP_HEADER;
    r->status = 0;
    r->keep_alive = 1;
    r->head = head_request;
    r->remaining = r->body_bytes = r->header_bytes = 0;
    r->error = NULL;
    r->len = 0;
}

static inline int pk_http__fail(pk_http_resp *r, const char *why)
{
    r->state = PK_HTTP_ERROR;
    r->error = why;
    return 0;
}

static inline int pk_http__lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

/* Does the header line [p, end) name `name` (lowercase, with the colon)? */
static inline const char *pk_http__header(const char *p, const char *end, const char *name)
{
    size_t n = strlen(name);
    if ((size_t)(end - p) < n)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (pk_http__lower((unsigned char)p[i]) != name[i])
            return NULL;
    p += n;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* Does [p, end) contain token (case-insensitive), e.g. "chunked", "close"? */
static inline int pk_http__has(const char *p, const char *end, const char *token)
{
    size_t n = strlen(token);
    for (; p + n <= end; p++) {
        size_t i = 0;
        while (i < n && pk_http__lower((unsigned char)p[i]) == token[i])
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

/* Parse the complete header section held in r->buf[0, hlen). */
static inline int pk_http__headers(pk_http_resp *r, uint32_t hlen)
{
    const char *p = r->buf, *end = r->buf + hlen;
    /* status line: HTTP/1.x SSS ... */
    if (hlen < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ')
        return pk_http__fail(r, "bad status line");
    int http10 = p[7] == '0';
    int s = 0;
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9')
            return pk_http__fail(r, "bad status code");
        s = s * 10 + (p[i] - '0');
    }
    if (s < 100 || s > 599 || (hlen > 12 && p[12] != ' ' && p[12] != '\r'))
        return pk_http__fail(r, "bad status code");
    r->status = s;
    r->keep_alive = !http10;
    int have_length = 0, chunked = 0;
    uint64_t length = 0;
    const char *line = memchr(p, '\n', (size_t)(end - p));
    while (line && line + 1 < end) {
        const char *ls = line + 1;
        const char *le = memchr(ls, '\n', (size_t)(end - ls));
        if (!le)
            break;
        const char *ve = (le > ls && le[-1] == '\r') ? le - 1 : le;
        const char *v;
        if (ve == ls)
            break; /* the empty line */
        if ((v = pk_http__header(ls, ve, "content-length:"))) {
            if (v == ve)
                return pk_http__fail(r, "empty Content-Length");
            uint64_t x = 0;
            for (; v < ve && *v != ' ' && *v != '\t'; v++) {
                if (*v < '0' || *v > '9' || x > (UINT64_MAX - 9) / 10)
                    return pk_http__fail(r, "bad Content-Length");
                x = x * 10 + (uint64_t)(*v - '0');
            }
            if (have_length && x != length)
                return pk_http__fail(r, "conflicting Content-Length");
            have_length = 1;
            length = x;
        } else if ((v = pk_http__header(ls, ve, "transfer-encoding:"))) {
            chunked = pk_http__has(v, ve, "chunked");
        } else if ((v = pk_http__header(ls, ve, "connection:"))) {
            if (pk_http__has(v, ve, "close"))
                r->keep_alive = 0;
            else if (pk_http__has(v, ve, "keep-alive"))
                r->keep_alive = 1;
        }
        line = le;
    }
    r->header_bytes += hlen;
    if (s < 200) { /* 1xx: informational, another header section follows */
        r->state = PK_HTTP_HEADER;
        return 1;
    }
    if (r->head || s == 204 || s == 304) {
        r->state = PK_HTTP_DONE;
    } else if (chunked) {
        r->state = PK_HTTP_CHUNK_SIZE;
    } else if (have_length) {
        r->remaining = length;
        r->state = length ? PK_HTTP_BODY_LENGTH : PK_HTTP_DONE;
    } else {
        r->keep_alive = 0;
        r->state = PK_HTTP_BODY_CLOSE;
    }
    return 1;
}

/* Consume what belongs to this response from data[0, n); returns bytes used. */
static inline size_t pk_http_resp_feed(pk_http_resp *r, const char *data, size_t n)
{
    size_t used = 0;
    while (used < n && r->state != PK_HTTP_DONE && r->state != PK_HTTP_ERROR) {
        const char *d = data + used;
        size_t left = n - used;
        switch (r->state) {
        case PK_HTTP_HEADER:
        case PK_HTTP_CHUNK_SIZE:
        case PK_HTTP_TRAILER: {
            /* collect one line (chunk size, trailer) or the header section */
            uint32_t cap = r->state == PK_HTTP_HEADER ? PK_HTTP_MAX_HEADER : PK_HTTP_MAX_CHUNK_LINE;
            size_t take = 0;
            int complete = 0;
            while (take < left) {
                char c = d[take++];
                if (r->len >= cap) {
                    pk_http__fail(r, r->state == PK_HTTP_HEADER ? "header section too large"
                                                                : "chunk line too long");
                    return used + take;
                }
                r->buf[r->len++] = c;
                if (c != '\n')
                    continue;
                if (r->state != PK_HTTP_HEADER ||
                    (r->len >= 2 && r->buf[r->len - 2] == '\n') ||
                    (r->len >= 4 && memcmp(r->buf + r->len - 4, "\r\n\r\n", 4) == 0)) {
                    complete = 1;
                    break;
                }
            }
            used += take;
            if (!complete)
                break;
            uint32_t l = r->len;
            r->len = 0;
            if (r->state == PK_HTTP_HEADER) {
                pk_http__headers(r, l);
            } else if (r->state == PK_HTTP_CHUNK_SIZE) {
                uint64_t x = 0;
                uint32_t i = 0, digits = 0;
                for (; i < l; i++, digits++) {
                    char c = r->buf[i];
                    int v = (c >= '0' && c <= '9') ? c - '0' : (pk_http__lower(c) >= 'a' && pk_http__lower(c) <= 'f')
                                                                   ? pk_http__lower(c) - 'a' + 10 : -1;
                    if (v < 0)
                        break;
                    if (x >> 60) {
                        pk_http__fail(r, "chunk size too large");
                        return used;
                    }
                    x = x * 16 + (uint64_t)v;
                }
                if (digits == 0 || (r->buf[i] != '\r' && r->buf[i] != '\n' && r->buf[i] != ';')) {
                    pk_http__fail(r, "bad chunk size");
                    return used;
                }
                r->remaining = x;
                r->state = x ? PK_HTTP_CHUNK_DATA : PK_HTTP_TRAILER;
            } else { /* trailer: ends at an empty line */
                if (l <= 2)
                    r->state = PK_HTTP_DONE;
            }
            break;
        }
        case PK_HTTP_BODY_LENGTH:
        case PK_HTTP_CHUNK_DATA: {
            size_t take = left < r->remaining ? left : (size_t)r->remaining;
            r->remaining -= take;
            r->body_bytes += take;
            used += take;
            if (r->remaining == 0)
                r->state = r->state == PK_HTTP_BODY_LENGTH ? PK_HTTP_DONE : PK_HTTP_CHUNK_CRLF;
            break;
        }
        case PK_HTTP_CHUNK_CRLF: {
            /* exactly CRLF (or a bare LF) after the chunk data; len counts the CR seen */
            char c = d[0];
            used++;
            if (c == '\n') {
                r->len = 0;
                r->state = PK_HTTP_CHUNK_SIZE;
            } else if (c != '\r' || r->len++ > 0) {
                pk_http__fail(r, "no CRLF after chunk data");
                return used;
            }
            break;
        }
        case PK_HTTP_BODY_CLOSE:
            r->body_bytes += left;
            used += left;
            break;
        }
    }
    return used;
}

/* The connection closed: a read-until-close body ends here; anything else
 * unfinished is a truncated response. */
static inline void pk_http_resp_eof(pk_http_resp *r)
{
    if (r->state == PK_HTTP_BODY_CLOSE)
        r->state = PK_HTTP_DONE;
    else if (r->state != PK_HTTP_DONE && r->state != PK_HTTP_ERROR)
        pk_http__fail(r, "connection closed mid-response");
}

#endif
