/*
 * rtls.h - TLS for rconn, with OpenSSL, underneath hiredis's reply parser.
 *
 * Debian 12's hiredis (0.14) has neither TLS nor a pluggable transport, so a
 * TLS connection is ours from the socket up: a non-blocking TCP connect and
 * TLS handshake bounded by a deadline (plain TCP to a TLS port, or a server
 * that stalls the handshake, fails at the deadline and never hangs), then
 * SSL_write of what hiredis formatted and SSL_read into hiredis's reader
 * (rnode.c). Every function here is bounded by a deadline and reports a
 * plain-language error ("certificate verify failed: ...").
 */
#ifndef QPOOL_RTLS_H
#define QPOOL_RTLS_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>

#include "redis/redis_conf.h"

/* A client context for one connection's tls block: the CA file (else the
 * system's), the client certificate and key, TLS 1.2 at least, peer
 * verification unless verify = false. NULL with err filled. */
SSL_CTX *rtls_ctx_new(const redis_tls_t *t, char *err, size_t errn);

/* A TCP connection to host:port (every address it resolves to, in turn),
 * non-blocking, TCP_NODELAY and keepalive on, made by deadline_ms
 * (monotonic). The fd, or -1 with err filled. */
int rtls_tcp_connect(const char *host, int port, int64_t deadline_ms, char *err, size_t errn);

/* The TLS handshake on fd, by deadline_ms: SNI and the name verified are
 * server_name (an IP address is verified as one, and sent no SNI). The SSL,
 * or NULL with err filled (the fd stays the caller's). */
SSL *rtls_handshake(SSL_CTX *ctx, int fd, const char *server_name, int64_t deadline_ms, char *err,
                    size_t errn);

/* Write all of buf by deadline_ms. 0, or -1 with err filled. */
int rtls_write(SSL *ssl, const char *buf, size_t len, int64_t deadline_ms, char *err, size_t errn);

/* One non-blocking read: bytes read (> 0), RTLS_WANT_READ / RTLS_WANT_WRITE
 * (poll for that, then call again), or -1 with err filled (closed, error). */
enum { RTLS_WANT_READ = 0, RTLS_WANT_WRITE = -2 };
int rtls_read(SSL *ssl, char *buf, size_t n, char *err, size_t errn);

#endif
