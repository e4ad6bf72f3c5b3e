/*
 * redis_conf.h - a Redis connection's settings, as the config loader
 * (config/config.c) fills them and the connection layer (rconn.c, rnode.c,
 * rtls.c, sentinel lookups, Cluster) reads them. Types only: the Redis layer needs
 * nothing else of the configuration.
 */
#ifndef QPOOL_REDIS_CONF_H
#define QPOOL_REDIS_CONF_H

#include <stdbool.h>

/* Queues a pool may list: a queue set's width (queue.h), also the width
 * of pause masks. */
#define QPOOL_MAX_QUEUES 30

/* tls = { ... } on a redis connection (rtls.c) */
typedef struct {
    bool enabled;          /* a tls group is present */
    char *ca_file;         /* PEM CA bundle; NULL: the system's */
    char *cert_file;       /* client certificate (PEM), with key_file */
    char *key_file;
    char *server_name;     /* SNI and the name verified; NULL: the host */
    bool verify;           /* verify the server's chain and name (default true) */
} redis_tls_t;

/* sentinels = [...]; master_name = ...; on a redis connection (sentinel.c) */
typedef struct {
    char **addrs;          /* "host:port", NULL-terminated; NULL: no Sentinel */
    int naddrs;
    char *master_name;
    char *username;        /* sentinel_username */
    char *password_env;    /* sentinel_password_env */
    char *password_file;   /* sentinel_password_file */
    char *file_password;   /* its content, read at load: never logged or printed */
} redis_sentinel_t;

/* Where a redis connection was defined: qpool.conf, the built-in "default"
 * (127.0.0.1:6379) used when qpool.conf names none, or a Laravel app. */
enum redis_kind { REDIS_FROM_CONF = 0, REDIS_STOCK = 1, REDIS_FROM_APP = 2 };

typedef struct {
    char *name;
    char *host;
    int port;
    char *socket;          /* Unix socket path; wins over host/port when set */
    int db;
    char *prefix;          /* Laravel's database.redis.options.prefix */
    char *username;
    char *password_env;    /* name of the environment variable holding the password */
    char *password;        /* from a Laravel app's config (laravel = ...): never logged or printed */
    double timeout;        /* connect / command timeout, seconds */
    enum redis_kind kind;
    char *app;             /* REDIS_FROM_APP: the app it was read from */
    /* an ACL password from a file, TLS, Sentinel */
    char *password_file;
    char *file_password;   /* password_file's content, read at load: never logged or printed */
    redis_tls_t tls;
    redis_sentinel_t sentinel;
    bool host_set, port_set; /* given in qpool.conf (cluster excludes them) */
    char **cluster;        /* cluster = ["host:port", ...]: Redis Cluster seed nodes, NULL-terminated; NULL: none */
    int ncluster;
} redis_conf_t;

bool redis_conf_same(const redis_conf_t *a, const redis_conf_t *b);
/* Deep copy / free of the issue-12 parts (password_file, tls, sentinel) of a
 * redis connection; the secrets are wiped before they are freed. */
void redis_conf_ext_copy(redis_conf_t *dst, const redis_conf_t *src);
void redis_conf_ext_free(redis_conf_t *r);
/* Wipe and free a connection's passwords (app-described, password_file's,
 * sentinel_password_file's); the rest stays. */
void redis_conf_wipe_secrets(redis_conf_t *r);
/* Free every field of a connection (secrets wiped) and zero it. */
void redis_conf_free(redis_conf_t *r);

#endif
