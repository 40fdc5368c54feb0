/* Test driver for the socket engine's sequence accounting and wire parser.
 *
 * It includes sock_engine.c itself, so it calls the real sequence window of
 * perfkit/seqwin.h (pk_seq_arrive, pk_seq_window_missing, pk_seq_widen; the DPDK
 * engine uses the same header), pk_wire_parse, and the real settle step in
 * pk_sock_join(), on an engine it builds by hand (no threads, no sockets).
 * tests/test_seq_window.py compiles it with ASan + UBSan and compares its
 * answers with an exact Python model.
 *
 * stdin, one command per line:
 *   C <flows> <n>            a case: n arrival lines "<flow> <seq>" follow,
 *   <sent_0> ... <sent_f-1>  then one line: what the sender sent per flow.
 *                            Prints "<lost before settle> <lost> <dup> <reorder> <bad>".
 *   W <iterations> <seed>    fuzz pk_wire_parse with random short/garbage buffers,
 *                            each in a heap block of exactly its length, and feed what
 *                            parses into seq_arrive as the receive loop does.
 *                            Prints "W <parsed> <rejected>"; exits 3 on a wrong answer.
 *   V <iterations> <seed>    pk_seq_widen against the 64-bit truth for sequences within
 *                            2^31 of the flow's next. Prints "V <checked>"; exits 3 on a wrong answer.
 * Build the engine source from elsewhere with -DPK_ENGINE_SRC='"path"' (and -DPK_HTTP_ROLES_SRC,
 * -DPK_STREAM_ROLES_SRC).
 */
#ifndef PK_ENGINE_SRC
#define PK_ENGINE_SRC "../../native/sock/sock_engine.c"
#endif
#include PK_ENGINE_SRC
#ifndef PK_HTTP_ROLES_SRC
#define PK_HTTP_ROLES_SRC "../../native/sock/http_roles.c"   /* the engine's role table names its HTTP roles */
#endif
#include PK_HTTP_ROLES_SRC
#ifndef PK_STREAM_ROLES_SRC
#define PK_STREAM_ROLES_SRC "../../native/sock/stream_roles.c"   /* ... and its stream roles */
#endif
#include PK_STREAM_ROLES_SRC
#include "perfkit/seqwin.h"

#include <inttypes.h>

static pk_sock_engine *fake_engine(uint32_t flows)
{
    pk_sock_engine *e = calloc(1, sizeof(*e));
    e->n = 2;
    e->w = aligned_alloc(64, 2 * sizeof(worker));
    memset(e->w, 0, 2 * sizeof(worker));
    for (int i = 0; i < 2; i++) {
        e->w[i].engine = e;
        e->w[i].conn_fd = -1;
        e->w[i].netns_fd = -1;
        e->w[i].cfg.size = 64;
        e->w[i].cfg.flows = flows;
        e->w[i].cfg.batch = 1;
    }
    e->w[0].cfg.role = PK_UDP_RECV;
    e->w[0].cfg.peer = -1;
    e->w[0].flows = calloc(flows, sizeof(pk_flow_state));
    e->w[1].cfg.role = PK_UDP_SEND;
    e->w[1].cfg.peer = 0;
    e->w[1].flow_sent = calloc(flows, sizeof(uint64_t));
    return e;
}

static int run_case(uint32_t flows, uint64_t n)
{
    if (flows == 0 || flows > PK_SOCK_MAX_FLOWS)
        return -1;
    pk_sock_engine *e = fake_engine(flows);
    worker *w = &e->w[0];
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t flow, seq;
        if (scanf("%" SCNu64 " %" SCNu64, &flow, &seq) != 2)
            return -1;
        /* as run_udp_recv: a flow id out of range is a bad packet; counters per arrival */
        if (flow >= w->cfg.flows) {
            bad++;
            continue;
        }
        uint64_t lost = 0, dup = 0, reorder = 0;
        pk_seq_arrive(&w->flows[flow], seq, &lost, &dup, &reorder);
        pk_add(&w->c, PK_seq_lost, lost);
        pk_add(&w->c, PK_seq_dup, dup);
        pk_add(&w->c, PK_seq_reorder, reorder);
    }
    for (uint32_t f = 0; f < flows; f++)
        if (scanf("%" SCNu64, &e->w[1].flow_sent[f]) != 1)
            return -1;
    uint64_t before = pk_read(&w->c, PK_seq_lost);
    pk_sock_join(e);   /* the real settle step: nothing is started, so it only settles */
    pk_sock_join(e);   /* settles once only */
    printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", before,
           pk_read(&w->c, PK_seq_lost), pk_read(&w->c, PK_seq_dup), pk_read(&w->c, PK_seq_reorder), bad);
    pk_sock_destroy(e);
    return 0;
}

static uint64_t rng_state;
static uint64_t rnd(void)   /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int wire_fuzz(uint64_t iters, uint64_t seed)
{
    rng_state = seed;
    pk_flow_state *flows = calloc(4, sizeof(pk_flow_state));
    uint64_t parsed = 0, rejected = 0, lost = 0, dup = 0, reorder = 0;
    for (uint64_t it = 0; it < iters; it++) {
        uint64_t len = rnd() % 3 == 0 ? rnd() % (2 * PK_WIRE_HDR_LEN + 1) : rnd() % 80;
        uint8_t *buf = malloc(len ? len : 1);   /* exactly len bytes: ASan sees any overread */
        for (uint64_t i = 0; i < len; i++)
            buf[i] = (uint8_t)rnd();
        int want_magic = len >= 4 && rnd() % 2;
        if (want_magic) {
            uint32_t m = PK_WIRE_MAGIC;
            memcpy(buf, &m, 4);
            if (len >= 8) {
                uint32_t fl = (uint32_t)(rnd() % 6);    /* 4 and 5 are out of range */
                memcpy(buf + 4, &fl, 4);
            }
            if (len >= 16) {   /* sequence numbers near the start, near each other, and wild */
                uint64_t kind = rnd() % 4, s = kind == 0 ? rnd() % 64 : kind == 1 ? rnd() % 20000
                                            : kind == 2 ? rnd() : UINT64_MAX - rnd() % 8;
                memcpy(buf + 8, &s, 8);
            }
        }
        pk_wire_hdr h;
        memset(&h, 0x5a, sizeof(h));
        int ok = pk_wire_parse(buf, len, &h);
        uint32_t magic = 0;
        if (len >= 4)
            memcpy(&magic, buf, 4);
        int expect = len >= PK_WIRE_HDR_LEN && magic == PK_WIRE_MAGIC;
        if (ok != expect) {
            fprintf(stderr, "pk_wire_parse(len %" PRIu64 ") = %d, expected %d\n", len, ok, expect);
            return 3;
        }
        if (ok && memcmp(&h, buf, PK_WIRE_HDR_LEN) != 0) {
            fprintf(stderr, "pk_wire_parse(len %" PRIu64 "): header differs from the bytes\n", len);
            return 3;
        }
        if (ok && h.flow < 4) {   /* as run_udp_recv: only in-range flows reach the window */
            uint64_t before = lost;
            pk_seq_arrive(&flows[h.flow], h.seq, &lost, &dup, &reorder);
            (void)before;
            parsed++;
        } else {
            rejected++;
        }
        free(buf);
    }
    printf("W %" PRIu64 " %" PRIu64 "\n", parsed, rejected);
    free(flows);
    return 0;
}

/* The DPDK engine's short header carries the low 32 bits of the sequence: the
 * receiver widens them against the flow's next. Exact for |s - next| < 2^31. */
static int widen_check(uint64_t iters, uint64_t seed)
{
    rng_state = seed;
    for (uint64_t it = 0; it < iters; it++) {
        uint64_t k = rnd() % 4;
        uint64_t next = k == 0 ? rnd() % 4096 : k == 1 ? 0xffffffffull + (rnd() % 8192) - 4096
                        : k == 2 ? rnd() >> 2 : rnd() % (1ull << 33);
        int64_t d = (int64_t)(rnd() % 0xfffffffeull) - 0x7fffffff;   /* |d| < 2^31 */
        if ((d < 0 && (uint64_t)-d > next))
            d = -(int64_t)next;
        uint64_t s = next + (uint64_t)d;
        uint64_t got = pk_seq_widen(next, (uint32_t)s);
        if (got != s) {
            fprintf(stderr, "pk_seq_widen(%" PRIu64 ", %u) = %" PRIu64 ", expected %" PRIu64 "\n",
                    next, (uint32_t)s, got, s);
            return 3;
        }
    }
    printf("V %" PRIu64 "\n", iters);
    return 0;
}

int main(void)
{
    char cmd[8];
    while (scanf("%7s", cmd) == 1) {
        if (cmd[0] == 'C') {
            uint32_t flows;
            uint64_t n;
            if (scanf("%u %" SCNu64, &flows, &n) != 2 || run_case(flows, n) != 0) {
                fprintf(stderr, "bad case input\n");
                return 2;
            }
        } else if (cmd[0] == 'W') {
            uint64_t iters, seed;
            if (scanf("%" SCNu64 " %" SCNu64, &iters, &seed) != 2)
                return 2;
            int rc = wire_fuzz(iters, seed);
            if (rc)
                return rc;
        } else if (cmd[0] == 'V') {
            uint64_t iters, seed;
            if (scanf("%" SCNu64 " %" SCNu64, &iters, &seed) != 2)
                return 2;
            int rc = widen_check(iters, seed);
            if (rc)
                return rc;
        } else {
            fprintf(stderr, "unknown command %s\n", cmd);
            return 2;
        }
    }
    return 0;
}
