/* HTTP over the engine's TCP: the server finds a request's end (the response is the template);
 * the client launches connections at the rate, sends requests, parses responses and times them. */
#include "tcp_internal.h"

/* SERVER: a whole request; it is answered unless a response is still going (then it is a
 * pipelined one, dropped): http_2xx counts the responses sent, as dperf's server does. */
static inline int served(pk_tcp_engine *e, const tsock *s)
{
    if (!(s->flags & (F_SENDING | F_FIN_SENT)))
        cnt(e, PK_http_2xx);
    return 1;
}

/* SERVER: request bytes; 1 when the header section is whole (a blank line). */
int tcp_server_scan(pk_tcp_engine *e, tsock *s, const uint8_t *p, uint32_t n)
{
    if (e->cfg.raw)                 /* dperf's raw payload: each segment is a request */
        return n > 0 ? served(e, s) : 0;
    if (s->hdr_bytes == 0 && n >= 4) {
        if (memcmp(p, "GET ", 4) == 0)
            cnt(e, PK_http_get);
        else if (memcmp(p, "POST", 4) == 0)
            cnt(e, PK_http_post);
        /* a segment that ends the header section (a client's request, whole): its first
         * "\r\n\r\n" is at or before that end, so within the limit: served, as below, without the search */
        if (!s->match && n <= MAX_HDR_BYTES + 1 && memcmp(p + n - 4, "\r\n\r\n", 4) == 0) {
            s->hdr_bytes = (uint16_t)n;
            s->match = 4;
            return served(e, s);
        }
        /* the usual case: the whole header section in this segment, its end found at once
         * (the first "\r\n\r\n", as the loop below finds it, within MAX_HDR_BYTES + 1 bytes) */
        const uint8_t *q = s->match ? NULL : memmem(p, n, "\r\n\r\n", 4);
        if (q && (uint32_t)(q - p) + 4 <= MAX_HDR_BYTES + 1) {
            s->hdr_bytes = (uint16_t)(q - p + 4);
            s->match = 4;
            return served(e, s);
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (s->hdr_bytes < 0xffff)
            s->hdr_bytes++;
        /* "\r\n\r\n": match counts the characters seen of it */
        if (c == '\r')
            s->match = (s->match == 2) ? 3 : 1;
        else if (c == '\n' && (s->match == 1 || s->match == 3))
            s->match++;
        else
            s->match = 0;
        if (s->match == 4)
            return served(e, s);
        if (s->hdr_bytes > MAX_HDR_BYTES)
            return -1;
    }
    return 0;
}

static const char CL_NAME[] = "content-length:";
static const char TE_NAME[] = "transfer-encoding:";
static const char CHUNKED[] = "chunked";

static inline int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* CLIENT: response bytes, in any split. Content-Length and chunked bodies (a body
 * read until close is not built). Returns 1 when the response is whole, 0 for more,
 * -1 malformed. Bytes after a whole response are an error (no pipelining).
 * Not perfkit/http1.h's parser: that one holds a connection's header section (8 KiB), a socket here is 64 bytes. */
int tcp_client_parse(tsock *s, const uint8_t *p, uint32_t n)
{
    uint32_t i = 0;
    while (i < n) {
        if (s->parse == P_BODY || s->parse == P_CDATA) {
            uint32_t k = n - i < s->body_left ? n - i : s->body_left;
            s->body_left -= k;
            i += k;
            if (s->body_left == 0) {
                s->parse = s->parse == P_BODY ? P_DONE : P_CCRLF;
                s->match = 0;
            }
            continue;
        }
        if (s->parse == P_DONE)
            return -1;
        if (s->parse == P_LINE) {   /* the rest of a line we do not read: to its LF at once */
            const uint8_t *nl = memchr(p + i, '\n', n - i);
            uint32_t k = nl ? (uint32_t)(nl - (p + i)) + 1 : n - i;
            if (s->hdr_bytes + k <= MAX_HDR_BYTES) {   /* else byte by byte, to fail where the limit is */
                s->hdr_bytes = (uint16_t)(s->hdr_bytes + k);
                i += k;
                if (nl)
                    s->parse = P_LSTART;
                continue;
            }
        }
        uint8_t c = p[i++];
        if (s->parse < P_BODY && ++s->hdr_bytes > MAX_HDR_BYTES)
            return -1;
        uint8_t lc = (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
        switch (s->parse) {
        case P_VER:                 /* "HTTP/1.x " */
            if (s->match < 7 ? c != (uint8_t)"HTTP/1."[s->match]
                             : s->match == 7 ? (c != '0' && c != '1') : c != ' ')
                return -1;
            if (++s->match == 9) {
                s->parse = P_CODE;
                s->match = 0;
                s->status = 0;
            }
            break;
        case P_CODE:
            if (c < '0' || c > '9')
                return -1;
            s->status = (uint16_t)(s->status * 10 + (c - '0'));
            if (++s->match == 3) {
                if (s->status < 100)
                    return -1;
                s->parse = P_LINE;
            }
            break;
        case P_LINE:                /* the rest of a line we do not read */
            if (c == '\n')
                s->parse = P_LSTART;
            break;
        case P_LSTART:
            if (c == '\r') {
                s->parse = P_LF_END;
                break;
            }
            if (c == '\n')
                goto headers_done;
            s->match = 0;
            s->parse = (c == 't' || c == 'T') ? P_TENAME : P_NAME;
            if (s->parse == P_TENAME)
                goto te_name;
            /* fall through */
        case P_NAME:
            if (lc == (uint8_t)CL_NAME[s->match]) {
                if (++s->match == sizeof(CL_NAME) - 1) {
                    if (s->flags & F_HAVE_CL)
                        return -1;  /* two Content-Lengths */
                    s->flags |= F_HAVE_CL;
                    s->body_left = 0;
                    s->match = 0;
                    s->parse = P_CLVAL;
                }
            } else {
                s->parse = (c == '\n') ? P_LSTART : P_LINE;
            }
            break;
        case P_TENAME:
        te_name:
            if (lc == (uint8_t)TE_NAME[s->match]) {
                if (++s->match == sizeof(TE_NAME) - 1) {
                    s->match = 0;
                    s->parse = P_TEVAL;
                }
            } else {
                s->parse = (c == '\n') ? P_LSTART : P_LINE;
            }
            break;
        case P_TEVAL:               /* only "chunked" is understood */
            if ((c == ' ' || c == '\t') && (s->match == 0 || s->match == sizeof(CHUNKED) - 1))
                break;
            if (c == '\r' && s->match == sizeof(CHUNKED) - 1)
                break;
            if (c == '\n') {
                if (s->match != sizeof(CHUNKED) - 1 || (s->flags & F_CHUNKED))
                    return -1;
                s->flags |= F_CHUNKED;
                s->parse = P_LSTART;
                break;
            }
            if (s->match >= sizeof(CHUNKED) - 1 || lc != (uint8_t)CHUNKED[s->match])
                return -1;
            s->match++;
            break;
        case P_CLVAL:
            if (c == ' ' || c == '\t' || c == '\r')
                break;
            if (c == '\n') {
                if (!s->match)
                    return -1;      /* no digits */
                s->parse = P_LSTART;
                break;
            }
            if (c < '0' || c > '9' || s->body_left > (1u << 30))
                return -1;
            s->body_left = s->body_left * 10 + (uint32_t)(c - '0');
            s->match = 1;
            break;
        case P_LF_END:
            if (c != '\n')
                return -1;
        headers_done:
            if (s->flags & F_CHUNKED) {
                if (s->flags & F_HAVE_CL)
                    return -1;      /* both: ambiguous framing, refused */
                s->parse = P_CSIZE;
                s->match = 0;
                s->body_left = 0;
                break;
            }
            if (!(s->flags & F_HAVE_CL))
                return -1;          /* read-until-close: not built */
            s->parse = s->body_left ? P_BODY : P_DONE;
            break;
        case P_CSIZE:               /* hex size; match: characters of the line so far */
            if (++s->match > MAX_CHUNK_LINE)
                return -1;
            if (hexval(c) >= 0) {
                if (s->body_left >= (1u << 27))
                    return -1;
                s->body_left = s->body_left * 16 + (uint32_t)hexval(c);
                s->flags |= F_HAVE_CL;   /* here: at least one digit */
            } else if (c == ';' || c == ' ' || c == '\t') {
                s->parse = P_CEXT;
            } else if (c == '\r') {
                ;
            } else if (c == '\n') {
                goto chunk_line_done;
            } else {
                return -1;
            }
            break;
        case P_CEXT:
            if (++s->match > MAX_CHUNK_LINE)
                return -1;
            if (c == '\n')
                goto chunk_line_done;
            break;
        chunk_line_done:
            if (!(s->flags & F_HAVE_CL))
                return -1;          /* no digits */
            s->flags &= (uint8_t)~F_HAVE_CL;
            s->match = 0;
            s->parse = s->body_left ? P_CDATA : P_TRAILER;
            break;
        case P_CCRLF:               /* the CRLF after chunk data */
            if (c == '\r' && s->match == 0) {
                s->match = 1;
                break;
            }
            if (c != '\n')
                return -1;
            s->match = 0;
            s->parse = P_CSIZE;
            break;
        case P_TRAILER:             /* trailer lines, then an empty line */
            if (c == '\r') {
                s->parse = P_TLF;
                break;
            }
            if (c == '\n') {
                s->parse = P_DONE;
                break;
            }
            s->match = 1;
            s->parse = P_TLINE;
            break;
        case P_TLINE:
            if (++s->match > 250)  /* match is 8 bits: trailer lines up to 250 */
                return -1;
            if (c == '\n')
                s->parse = P_TRAILER;
            break;
        case P_TLF:
            if (c != '\n')
                return -1;
            s->parse = P_DONE;
            break;
        default:
            return -1;
        }
    }
    return s->parse == P_DONE ? 1 : 0;
}

/* CLIENT: response bytes (tcp_client_parse's result). A server sends the same header section
 * response after response: one that starts a segment and is byte for byte the last one parsed
 * whole from a segment's start leaves the parser where that one did (the parse is a function of
 * the bytes from the fresh state: status, Content-Length, P_BODY or P_DONE), with a compare
 * instead of the byte-by-byte walk; the rest of the segment goes through the parser. */
int tcp_client_take(pk_tcp_engine *e, tsock *s, const uint8_t *p, uint32_t n)
{
    const int fresh = s->parse == P_VER && s->match == 0;
    const uint32_t h = e->rh_len;
    if (fresh && h && n >= h && memcmp(p, e->rh, h) == 0) {
        s->status = e->rh_status;
        s->flags |= F_HAVE_CL;
        s->hdr_bytes = (uint16_t)h;
        s->body_left = e->rh_body;
        s->parse = e->rh_body ? P_BODY : P_DONE;
        s->match = 0;
        return n == h ? (s->parse == P_DONE) : tcp_client_parse(s, p + h, n - h);
    }
    int r = tcp_client_parse(s, p, n);
    /* remembered: a whole header section of this segment with a Content-Length (the body bytes
     * the parser took here are the segment's after the headers: that length is what is left + them) */
    if (fresh && r >= 0 && (s->parse == P_BODY || s->parse == P_DONE) && !(s->flags & F_CHUNKED) &&
        (s->flags & F_HAVE_CL) && s->hdr_bytes <= RH_MAX && s->hdr_bytes <= n) {
        memcpy(e->rh, p, s->hdr_bytes);
        e->rh_len = s->hdr_bytes;
        e->rh_body = s->body_left + (n - s->hdr_bytes);
        e->rh_status = s->status;
    }
    return r;
}

static void client_reset_parser(tsock *s)
{
    s->parse = P_VER;
    s->match = 0;
    s->hdr_bytes = 0;
    s->status = 0;
    s->body_left = 0;
    s->flags &= (uint8_t)~(F_HAVE_CL | F_CHUNKED);
}

void tcp_client_request(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    client_reset_parser(s);
    s->flags |= F_WAITING;
    s->reqs++;
    s->t0 = now;
    s->ka_lag = 0;                  /* on the grid (tcp_on_ka says how late it was) */
    cnt(e, PK_http_req);
    if (e->cfg.raw) {               /* no HTTP: the response is as many bytes back */
        s->parse = P_BODY;
        s->body_left = e->cfg.msg_len;
    } else
        cnt(e, e->cfg.msg_len >= 4 && memcmp(e->msg, "POST", 4) == 0 ? PK_http_post : PK_http_get);
    tcp_start_message(e, idx, now);
}

void tcp_client_close(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    if (e->cfg.udp) {
        tcp_udp_close(e, idx);
        return;
    }
    tsock *s = &e->socks[idx];
    tcp_timer_del(e, idx);
    if (e->cfg.fast_close) {
        tcp_sock_tx(e, idx, snd_next(s), TH_RST | TH_ACK, 0, 0);
        tcp_sock_free(e, idx, PK_sock_close);
        return;
    }
    tcp_send_fin(e, idx);
    tcp_timer_add(e, idx, TL_RTO, now);
}

/* CLIENT: a whole response. */
void tcp_client_response(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    s->flags &= (uint8_t)~F_WAITING;
    cnt(e, PK_http_resp);
    uint16_t st = s->status;
    cnt_status(e, st);
    if (st >= 400)
        cnt(e, PK_http_err);
    pk_lat_sample(&e->c, &e->hist, &e->lat_min, (uint64_t)((double)(now - s->t0) * 1e9 / (double)e->hz), PK_LAT);
    int more = e->cfg.ka_interval_ns && e->launching && !(s->flags & F_FIN_RCVD) &&
               (e->cfg.ka_requests == 0 || s->reqs < e->cfg.ka_requests);
    if (more) {
        /* dperf's keep-alive grid: the next request an interval after this one's grid point,
         * not after its response; a late one goes at once (catching up) */
        tcp_timer_add_at(e, idx, TL_KA, s->t0 - s->ka_lag + e->ka_c);
        return;
    }
    tcp_client_close(e, idx, now);
}

void tcp_launch(pk_tcp_engine *e, uint64_t now, uint64_t t_start)
{
    /* held at the concurrency target (a keep-alive run's usual pass): no arithmetic; when a
     * connection leaves, the schedule goes on from the target then (no backlog, as below) */
    if (e->cfg.cc && e->current >= e->cfg.cc && !e->cfg.flood) {
        e->held = 1;
        return;
    }
    double el = (double)(now - t_start) / (double)e->hz;
    double ss = (double)e->cfg.slow_start_ns / 1e9;
    double target = (ss > 0 && el < ss) ? e->cfg.cps * el * el / (2 * ss)
                                        : e->cfg.cps * (el - ss / 2);
    if (target < 1 && el > 0)
        target = 1;                 /* the first connection at once */
    if (e->held) {
        e->held = 0;
        if ((double)e->launched < target)
            e->launched = (uint64_t)target;
    }
    uint32_t budget = e->cfg.launch_num;
    /* behind (the worker lost its CPU): catch up only as the transmit queue has room */
    while (budget-- && (double)e->launched < target && e->ntx < TXQ / 2) {
        if (e->cfg.flood) {         /* a SYN (udp: pipeline datagrams) from the next tuple; nothing is kept */
            tuple4 t;
            uint32_t at = e->cursor;
            tcp_sock_tuple(e, at, &t);
            e->cursor = (e->cursor + 1 == e->nsock) ? 0 : e->cursor + 1;
            e->launched++;
            if (e->cfg.udp)
                tcp_udp_flood(e, at);
            else if (e->cfg.ipv6 && e->cfg.ndips)   /* change_dip over IPv6: the next address whole */
                tcp_tx_syn6_to(e, t.cip, e->dips6 + 16 * tcp_flood_next(e), t.cport, t.sport, tsc_rand(e, now));
            else
                tcp_tx_seg(e, t.cip, tcp_flood_dst(e), t.cport, t.sport, tsc_rand(e, now), 0, TH_SYN, 0, 0);
            continue;
        }
        if (e->cfg.cc && e->current >= e->cfg.cc) {
            e->launched = (uint64_t)target;   /* at the concurrency target: no backlog */
            return;
        }
        uint32_t idx = UINT32_MAX;
        for (uint32_t probe = 0; probe < 64; probe++) {
            uint32_t i = e->cursor;
            e->cursor = (e->cursor + 1 == e->nsock) ? 0 : e->cursor + 1;
            if (e->socks[i].state == S_CLOSED) {
                idx = i;
                break;
            }
        }
        if (idx == UINT32_MAX)
            return;                 /* the table is busy here: later */
        tsock *s = &e->socks[idx];
        memset(s, 0, sizeof(*s));
        s->state = S_SYN_SENT;
        tuple4 t;
        tcp_sock_tuple(e, idx, &t);
        s->iss = isn_for(e, t.cip, t.cport, rte_be_to_cpu_32(e->cfg.server_ip), t.sport, now);
        s->snd_base = s->iss + 1;
        s->t0 = now;
        e->launched++;
        e->current++;
        cnt(e, PK_sock_open);
        pk_set(&e->c, PK_sock_current, e->current);
        if (e->cfg.udp) {           /* protocol udp: the request at once, no handshake */
            tcp_udp_open(e, idx, now);
            continue;
        }
        tcp_sock_tx(e, idx, s->iss, TH_SYN, 0, 0);
        tcp_timer_add(e, idx, TL_RTO, now);
    }
}
