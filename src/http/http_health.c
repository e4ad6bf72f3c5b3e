/*
 * http_health.c - what /healthz says, kept in memory (see http_health.h).
 */
#include "http/http_health.h"
#include "core/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Whether Redis answers PING on hh's own connection; why not into why. */
static bool redis_pings(http_health_t *hh, char *why, size_t n)
{
    rconn_t *rc = hh->rc;
    bool ok = false;
    if (!rc) return true; /* no Redis at all: the master's state alone */
    if (rconn_ensure(rc) == 0) {
        const char *argv[] = {"PING"};
        size_t lens[] = {4};
        redisReply *r = rconn_call(rc, 1, argv, lens);
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        else if (!rc->last_error[0]) snprintf(rc->last_error, sizeof rc->last_error, "no reply");
    }
    if (!ok) snprintf(why, n, "redis %s unavailable: %s", rc->name, rc->last_error);
    return ok;
}

static void check(http_health_t *hh)
{
    cJSON *st = http_ctl_call(hh->api, "{\"cmd\":\"status\"}", HTTP_CTL_TIMEOUT_MS);
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(st, "state");
    char why[300] = "";
    bool redis_ok = redis_pings(hh, why, sizeof why);
    pthread_mutex_lock(&hh->lock);
    hh->master_ok = st != NULL;
    snprintf(hh->state, sizeof hh->state, "%s", cJSON_IsString(state) ? state->valuestring : "?");
    hh->redis_ok = redis_ok;
    snprintf(hh->reason, sizeof hh->reason, "%s", why);
    hh->checked_ms = mono_ms();
    pthread_mutex_unlock(&hh->lock);
    cJSON_Delete(st);
}

/* Sleep ms unless told to stop: true when told. */
static bool sleep_or_stop(http_health_t *hh, int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&hh->lock);
    while (!hh->stop && pthread_cond_timedwait(&hh->wake, &hh->lock, &until) != ETIMEDOUT) {}
    bool stop = hh->stop;
    pthread_mutex_unlock(&hh->lock);
    return stop;
}

static void *health_loop(void *arg)
{
    http_health_t *hh = arg;
    while (!sleep_or_stop(hh, HTTP_HEALTH_EVERY_MS)) check(hh);
    return NULL;
}

int http_health_start(http_health_t *hh, http_ctx_t *api, const redis_conf_t *redis)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&hh->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&hh->lock, NULL);
    hh->api = api;
    hh->rc = redis ? rconn_new(redis) : NULL;
    /* a hung Redis holds a check 3 s at most; a PING slowed by a busy
     * machine (1 to 3 s) is not an outage */
    if (hh->rc && hh->rc->conf.timeout > 3) hh->rc->conf.timeout = 3;
    check(hh);
    int err = pthread_create(&hh->thread, NULL, health_loop, hh);
    hh->running = err == 0;
    if (err) log_error("cannot start the health check's thread: %s", strerror(err));
    return err ? -1 : 0;
}

void http_health_stop(http_health_t *hh)
{
    if (hh->running) {
        pthread_mutex_lock(&hh->lock);
        hh->stop = true;
        pthread_cond_signal(&hh->wake);
        pthread_mutex_unlock(&hh->lock);
        pthread_join(hh->thread, NULL);
        hh->running = false;
    }
    if (hh->rc) rconn_free(hh->rc);
    hh->rc = NULL;
}

void http_health_reply(http_health_t *hh, int64_t now, http_reply_t *out)
{
    pthread_mutex_lock(&hh->lock);
    int64_t age = now - hh->checked_ms;
    if (!hh->master_ok || age > HTTP_HEALTH_STALE_MS) {
        pthread_mutex_unlock(&hh->lock);
        if (age > HTTP_HEALTH_STALE_MS)
            http_reply_error(out, 503, "the health check is late (its last outcome is %lld ms old)", (long long)age);
        else
            http_reply_error(out, 503, "the master did not answer within %d ms", HTTP_CTL_TIMEOUT_MS);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "state", hh->state);
    cJSON_AddBoolToObject(o, "ok", hh->redis_ok);
    if (!hh->rc) cJSON_AddStringToObject(o, "redis", "none");
    if (!hh->redis_ok) cJSON_AddStringToObject(o, "reason", hh->reason);
    bool ok = hh->redis_ok;
    pthread_mutex_unlock(&hh->lock);
    http_reply_json(out, ok ? 200 : 503, o);
}
