/* Incremental HTTP/1.x response parser for load clients (and a request reader for servers).
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
 * Requests (a server's side): pk_http_req_parse, below.
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


/* ------------------------------------------------------------------ requests
 * Incremental HTTP/1.x request reader for servers (perfkit http-serve): the
 * request at the start of a connection's buffer, parsed a whole line at a time
 * as bytes arrive, each byte searched once however the request is split.
 * Strict, as a server facing strangers must be: "METHOD SP TARGET SP HTTP/1.x"
 * and "Name: value" lines ending in CRLF, one Content-Length of digits only,
 * at most PK_HTTP_MAX_HEADERS header lines; the body is skipped, not decoded.
 *
 *   pk_http_req q; pk_http_req_init(&q);
 *   after each read into buf[0, len) (a buffer of cap bytes):
 *       n = pk_http_req_parse(&q, buf, len, cap);
 *       n > 0: buf[0, n) is a whole request (q.post, q.close); drop it and
 *              pk_http_req_init(&q) for the next
 *       n == 0: incomplete;  n < 0: answer status -n (400, 413, 431, 501) and close
 */
#ifndef PK_HTTP_MAX_HEADERS
#define PK_HTTP_MAX_HEADERS 100
#endif

typedef struct pk_http_req {
    uint32_t pos;           /* bytes of whole head lines parsed */
    uint32_t scan;          /* bytes searched for the end of the next line */
    uint32_t head;          /* the head's length (to its blank line) once whole, else 0 */
    uint32_t nhdr;          /* header lines so far */
    uint64_t clen;          /* Content-Length (saturated far above any cap) */
    uint8_t started;        /* the request line is read */
    uint8_t have_clen, te;  /* a Content-Length, a Transfer-Encoding */
    uint8_t close;          /* Connection: close */
    uint8_t post;           /* the method is POST */
} pk_http_req;

static inline void pk_http_req_init(pk_http_req *q)
{
    memset(q, 0, sizeof(*q));
}

/* RFC 9110 tchar: what a method or a header name is made of. */
static inline int pk_http__tchar(unsigned char c)
{
    if (((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9'))
        return 1;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        return 1;
    default:
        return 0;
    }
}

/* Is [p, e) "METHOD SP TARGET SP HTTP/1.x"? Sets q->post for a POST. */
static inline int pk_http__request_line(pk_http_req *q, const char *p, const char *e)
{
    const char *m = p;
    while (p < e && pk_http__tchar((unsigned char)*p))
        p++;
    if (p == m || p >= e || *p != ' ')
        return 0;
    q->post = p - m == 4 && memcmp(m, "POST", 4) == 0;
    const char *t = ++p;
    while (p < e && (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f)
        p++;
    if (p == t || p >= e || *p != ' ')
        return 0;
    p++;
    return e - p == 8 && memcmp(p, "HTTP/1.", 7) == 0 && p[7] >= '0' && p[7] <= '9';
}

/* Is the header name [p, p + n) lname (lowercase)? */
static inline int pk_http__name_is(const char *p, size_t n, const char *lname)
{
    if (n != strlen(lname))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (pk_http__lower((unsigned char)p[i]) != lname[i])
            return 0;
    return 1;
}

/* One header line [p, e), its CRLF cut off: 0, or the status to answer. */
static inline int pk_http__req_header(pk_http_req *q, const char *p, const char *e)
{
    const char *n = p;
    while (p < e && pk_http__tchar((unsigned char)*p))
        p++;
    if (p == n || p >= e || *p != ':') /* no name, no colon, a space before it, or a folded line */
        return 400;
    size_t nlen = (size_t)(p - n);
    const char *v = p + 1;
    for (const char *c = v; c < e; c++)
        if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
            return 400; /* a control byte in the value */
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    const char *ve = e;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    if (pk_http__name_is(n, nlen, "content-length")) {
        if (q->have_clen || v == ve)
            return 400; /* a second one, even equal (two 5s were once read as 55), or empty */
        uint64_t x = 0;
        for (; v < ve; v++) {
            if (*v < '0' || *v > '9')
                return 400;
            if (x < (1ull << 40))
                x = x * 10 + (uint64_t)(*v - '0');
        }
        q->have_clen = 1;
        q->clen = x;
    } else if (pk_http__name_is(n, nlen, "transfer-encoding")) {
        q->te = 1;
    } else if (pk_http__name_is(n, nlen, "connection")) {
        if (pk_http__has(v, ve, "close"))
            q->close = 1;
    }
    return 0;
}

/* The request at the start of buf[0, len), parsing on from where q stopped: its
 * length (head and Content-Length body) once whole, 0 while incomplete, or minus
 * the status to answer: 400 malformed, 431 a head over cap bytes or over
 * PK_HTTP_MAX_HEADERS lines, 413 a body that does not fit in cap with its head,
 * 501 a Transfer-Encoding (bodies are not decoded). */
static inline long pk_http_req_parse(pk_http_req *q, const char *buf, uint32_t len, uint32_t cap)
{
    while (!q->head) {
        uint32_t from = q->scan > q->pos ? q->scan : q->pos;
        const char *nl = from < len ? memchr(buf + from, '\n', len - from) : NULL;
        if (!nl) {
            q->scan = len;
            return len >= cap ? -431 : 0;
        }
        const char *p = buf + q->pos;
        if (nl == p || nl[-1] != '\r')
            return -400; /* a bare LF */
        const char *e = nl - 1;
        uint32_t next = (uint32_t)(nl + 1 - buf);
        if (!q->started) {
            if (e != p) { /* (an empty line before the request line is ignored: RFC 9112 2.2) */
                if (!pk_http__request_line(q, p, e))
                    return -400;
                q->started = 1;
            }
        } else if (e == p) {
            q->head = next;
        } else {
            if (++q->nhdr > PK_HTTP_MAX_HEADERS)
                return -431;
            int bad = pk_http__req_header(q, p, e);
            if (bad)
                return -bad;
        }
        q->pos = q->scan = next;
    }
    if (q->te)
        return q->have_clen ? -400 : -501;
    if (q->head > cap || q->clen > cap - q->head)
        return -413;
    uint64_t total = q->head + q->clen;
    return total <= len ? (long)total : 0;
}

#endif
