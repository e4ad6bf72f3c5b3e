/*
 * redis_conf.c - see redis_conf.h: copying, comparing and freeing a
 * connection's settings; secrets are wiped before they are freed.
 */
#include "redis/redis_conf.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

void redis_conf_wipe_secrets(redis_conf_t *r)
{
    free_wiped(r->password);
    free_wiped(r->file_password);
    free_wiped(r->sentinel.file_password);
    r->password = r->file_password = r->sentinel.file_password = NULL;
}

void redis_conf_ext_free(redis_conf_t *r)
{
    FREE_ALL(r->password_file, r->tls.ca_file, r->tls.cert_file, r->tls.key_file, r->tls.server_name,
             r->sentinel.master_name, r->sentinel.username, r->sentinel.password_env, r->sentinel.password_file);
    free_wiped(r->file_password);
    free_wiped(r->sentinel.file_password);
    free_strv(r->sentinel.addrs);
    free_strv(r->cluster);
}

/* Every field of a connection, and its secrets wiped. */
void redis_conf_free(redis_conf_t *r)
{
    FREE_ALL(r->name, r->host, r->socket, r->prefix, r->username, r->password_env, r->app);
    free_wiped(r->password);
    redis_conf_ext_free(r);
    memset(r, 0, sizeof *r);
}

void redis_conf_ext_copy(redis_conf_t *dst, const redis_conf_t *src)
{
    dst->password_file = xstrdup_or_null(src->password_file);
    dst->file_password = xstrdup_or_null(src->file_password);
    dst->tls = src->tls;
    dst->tls.ca_file = xstrdup_or_null(src->tls.ca_file);
    dst->tls.cert_file = xstrdup_or_null(src->tls.cert_file);
    dst->tls.key_file = xstrdup_or_null(src->tls.key_file);
    dst->tls.server_name = xstrdup_or_null(src->tls.server_name);
    dst->sentinel = src->sentinel;
    dst->sentinel.addrs = NULL;
    if (src->sentinel.addrs) {
        dst->sentinel.addrs = xcalloc((size_t)src->sentinel.naddrs + 1, sizeof(char *));
        for (int i = 0; i < src->sentinel.naddrs; i++) dst->sentinel.addrs[i] = xstrdup(src->sentinel.addrs[i]);
    }
    dst->sentinel.master_name = xstrdup_or_null(src->sentinel.master_name);
    dst->sentinel.username = xstrdup_or_null(src->sentinel.username);
    dst->sentinel.password_env = xstrdup_or_null(src->sentinel.password_env);
    dst->sentinel.password_file = xstrdup_or_null(src->sentinel.password_file);
    dst->sentinel.file_password = xstrdup_or_null(src->sentinel.file_password);
    dst->cluster = src->cluster ? strv_dup(src->cluster) : NULL;
}

static bool redis_ext_same(const redis_conf_t *a, const redis_conf_t *b)
{
    const redis_tls_t *t = &a->tls, *u = &b->tls;
    const redis_sentinel_t *s = &a->sentinel, *v = &b->sentinel;
    return str_eq(a->password_file, b->password_file) && str_eq(a->file_password, b->file_password) &&
           t->enabled == u->enabled && t->verify == u->verify && str_eq(t->ca_file, u->ca_file) &&
           str_eq(t->cert_file, u->cert_file) && str_eq(t->key_file, u->key_file) &&
           str_eq(t->server_name, u->server_name) && strv_eq(s->addrs, v->addrs) &&
           str_eq(s->master_name, v->master_name) && str_eq(s->username, v->username) &&
           str_eq(s->password_env, v->password_env) && str_eq(s->password_file, v->password_file) &&
           str_eq(s->file_password, v->file_password) && strv_eq(a->cluster, b->cluster);
}

bool redis_conf_same(const redis_conf_t *a, const redis_conf_t *b)
{
    if (!a || !b) return a == b;
    return str_eq(a->host, b->host) && a->port == b->port && str_eq(a->socket, b->socket) &&
           a->db == b->db && str_eq(a->prefix, b->prefix) && str_eq(a->username, b->username) &&
           str_eq(a->password_env, b->password_env) && str_eq(a->password, b->password) &&
           a->timeout == b->timeout &&
           redis_ext_same(a, b);
}
