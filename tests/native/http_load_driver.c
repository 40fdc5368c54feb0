/* Test driver for the HTTP client of the socket engine (sock_engine.c +
 * http_roles.c) outside Python, so it can run under ASan/UBSan.
 * usage: http_load_driver IPV4 PORT TLS KEEPALIVE USERS DURATION_MS URL_RANDOM REQUEST_FILE
 * REQUEST_FILE holds the request templates back to back (HttpLoad.request_bytes()).
 * Prints "name value" for every counter, then "url K sent answered failed". */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sock_engine.h"

int main(int argc, char **argv)
{
    if (argc != 9)
        return 2;
    FILE *f = fopen(argv[8], "rb");
    if (!f)
        return 2;
    static uint8_t blob[1 << 20];
    size_t n = fread(blob, 1, sizeof(blob), f);
    fclose(f);
    pk_sock_worker_cfg c;
    memset(&c, 0, sizeof(c));
    c.role = PK_HTTP_CLIENT;
    c.local.family = c.remote.family = AF_INET;
    inet_pton(AF_INET, argv[1], c.remote.ip);
    c.remote.port = (uint16_t)atoi(argv[2]);
    c.peer = -1;
    c.size = c.flows = c.batch = 1;
    c.cpu = -1;
    c.tls = atoi(argv[3]);
    c.keepalive = atoi(argv[4]);
    c.users = (uint32_t)atoi(argv[5]);
    c.duration_ns = (uint64_t)atoll(argv[6]) * 1000000ull;
    c.url_random = atoi(argv[7]);
    c.connect_timeout_ns = 2000000000ull;
    c.response_timeout_ns = 2000000000ull;
    c.blob = blob;
    c.blob_len = (uint32_t)n;
    char err[512] = "";
    pk_sock_engine *e = pk_sock_create(&c, 1, err, sizeof(err));
    if (!e || pk_sock_start(e, err, sizeof(err)) != 0) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    pk_sock_join(e);
    static uint64_t cnt[PK_NCOUNTERS], hist[PK_HIST_BUCKETS], urls[3 * 64];
    pk_sock_snapshot(e, 0, cnt, hist);
    for (int i = 0; i < PK_NCOUNTERS; i++)
        printf("%s %llu\n", pk_counter_names[i], (unsigned long long)cnt[i]);
    int k = pk_sock_http_urls(e, 0, urls, 64);
    for (int i = 0; i < k && i < 64; i++)
        printf("url %d %llu %llu %llu\n", i, (unsigned long long)urls[3 * i], (unsigned long long)urls[3 * i + 1],
               (unsigned long long)urls[3 * i + 2]);
    const char *msg = pk_sock_error(e);
    if (msg)
        fprintf(stderr, "engine: %s\n", msg);
    pk_sock_destroy(e);
    return 0;
}
