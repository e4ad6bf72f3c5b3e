/*
 * rtls.c - see rtls.h.
 */
#include "redis/rtls.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The oldest queued OpenSSL error, or fallback. Clears the queue. */
static void ssl_err(char *err, size_t errn, const char *what, const char *fallback)
{
    unsigned long e = ERR_get_error();
    char buf[256];
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    snprintf(err, errn, "%s: %s", what, e ? buf : fallback);
    ERR_clear_error();
}

SSL_CTX *rtls_ctx_new(const redis_tls_t *t, char *err, size_t errn)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        ssl_err(err, errn, "TLS", "cannot create a context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx, t->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    int ok = t->ca_file ? SSL_CTX_load_verify_locations(ctx, t->ca_file, NULL)
                        : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        ssl_err(err, errn, t->ca_file ? t->ca_file : "the system's CA certificates", "cannot load");
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (t->cert_file && SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) != 1) {
        ssl_err(err, errn, t->cert_file, "cannot load the client certificate");
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (t->key_file && (SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM) != 1 ||
                        SSL_CTX_check_private_key(ctx) != 1)) {
        ssl_err(err, errn, t->key_file, "cannot load the client key");
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* Wait for events on fd until deadline_ms. 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - mono_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        return r < 0 ? -1 : r > 0;
    }
}

static void tune_socket(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

/* Connect one address. The fd, or -1 with err filled. */
static int connect_one(const struct addrinfo *ai, int64_t deadline_ms, char *err, size_t errn)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        snprintf(err, errn, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
        snprintf(err, errn, "connect: %s", strerror(errno));
        close(fd);
        return -1;
    }
    int w = wait_fd(fd, POLLOUT, deadline_ms), soerr = 0;
    socklen_t sl = sizeof soerr;
    if (w <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
        snprintf(err, errn, "connect: %s", w == 0 ? "timed out" : strerror(soerr ? soerr : errno));
        close(fd);
        return -1;
    }
    tune_socket(fd);
    return fd;
}

int rtls_tcp_connect(const char *host, int port, int64_t deadline_ms, char *err, size_t errn)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(host, ps, &hints, &res);
    if (g) {
        snprintf(err, errn, "cannot resolve %s: %s", host, gai_strerror(g));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0 && mono_ms() < deadline_ms; ai = ai->ai_next)
        fd = connect_one(ai, deadline_ms, err, errn);
    freeaddrinfo(res);
    if (fd < 0 && !err[0]) snprintf(err, errn, "connect: timed out");
    return fd;
}

static bool is_ip(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* Name the server's certificate must carry: a host name or an IP address. */
static int set_peer_name(SSL *ssl, const char *name)
{
    if (is_ip(name)) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 ? 0 : -1;
    if (SSL_set_tlsext_host_name(ssl, name) != 1) return -1;
    return SSL_set1_host(ssl, name) == 1 ? 0 : -1;
}

static void handshake_error(SSL *ssl, int rc, char *err, size_t errn)
{
    long v = SSL_get_verify_result(ssl);
    int e = SSL_get_error(ssl, rc);
    if (v != X509_V_OK && (SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER)) {
        snprintf(err, errn, "TLS handshake: certificate verify failed: %s",
                 X509_verify_cert_error_string(v));
        ERR_clear_error();
    } else if (e == SSL_ERROR_SSL)
        ssl_err(err, errn, "TLS handshake", "failed");
    else if (e == SSL_ERROR_SYSCALL && errno)
        snprintf(err, errn, "TLS handshake: %s", strerror(errno));
    else
        snprintf(err, errn, "TLS handshake: the server closed the connection (not a TLS port?)");
}

SSL *rtls_handshake(SSL_CTX *ctx, int fd, const char *server_name, int64_t deadline_ms, char *err,
                    size_t errn)
{
    ERR_clear_error();
    SSL *ssl = SSL_new(ctx);
    if (!ssl || SSL_set_fd(ssl, fd) != 1 || set_peer_name(ssl, server_name) < 0) {
        ssl_err(err, errn, "TLS", "cannot set up the connection");
        SSL_free(ssl);
        return NULL;
    }
    for (;;) {
        errno = 0;
        int rc = SSL_connect(ssl);
        if (rc == 1) return ssl;
        int e = SSL_get_error(ssl, rc);
        short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
        if (!ev) {
            handshake_error(ssl, rc, err, errn);
            break;
        }
        int w = wait_fd(fd, ev, deadline_ms);
        if (w <= 0) {
            snprintf(err, errn, "TLS handshake: %s",
                     w == 0 ? "timed out (is it a TLS port?)" : strerror(errno));
            break;
        }
    }
    SSL_free(ssl);
    return NULL;
}

int rtls_write(SSL *ssl, const char *buf, size_t len, int64_t deadline_ms, char *err, size_t errn)
{
    size_t off = 0;
    while (off < len) {
        ERR_clear_error();
        errno = 0;
        int rc = SSL_write(ssl, buf + off, (int)(len - off > 1 << 30 ? 1 << 30 : len - off));
        if (rc > 0) {
            off += (size_t)rc;
            continue;
        }
        int e = SSL_get_error(ssl, rc);
        short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
        if (!ev) {
            if (e == SSL_ERROR_SSL) ssl_err(err, errn, "TLS write", "failed");
            else snprintf(err, errn, "TLS write: %s", errno ? strerror(errno) : "connection closed");
            return -1;
        }
        int w = wait_fd(SSL_get_fd(ssl), ev, deadline_ms);
        if (w <= 0) {
            snprintf(err, errn, "TLS write: %s", w == 0 ? "timed out" : strerror(errno));
            return -1;
        }
    }
    return 0;
}

int rtls_read(SSL *ssl, char *buf, size_t n, char *err, size_t errn)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_read(ssl, buf, (int)n);
    if (rc > 0) return rc;
    switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ: return RTLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return RTLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN: snprintf(err, errn, "connection closed by the server"); return -1;
    case SSL_ERROR_SSL: ssl_err(err, errn, "TLS read", "failed"); return -1;
    default:
        snprintf(err, errn, "%s", errno ? strerror(errno) : "connection lost");
        return -1;
    }
}
