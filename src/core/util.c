/*
 * util.c - see util.h.
 */
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void oom(void)
{
    static const char msg[] = "qpool: out of memory\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) oom();
    return p;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *p;
    va_start(ap, fmt);
    if (vasprintf(&p, fmt, ap) < 0) oom();
    va_end(ap);
    return p;
}

void free_strv(char **v)
{
    if (!v) return;
    for (char **p = v; *p; p++) free(*p);
    free(v);
}

size_t strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n]) n++;
    return n;
}

bool str_eq(const char *a, const char *b)
{
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

bool strv_eq(char *const *a, char *const *b)
{
    if (!a || !b) return a == b;
    size_t n = strv_len(a);
    if (n != strv_len(b)) return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i], b[i])) return false;
    return true;
}

char *xstrdup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

void free_wiped(char *s)
{
    if (s) explicit_bzero(s, strlen(s));
    free(s);
}

void free_all(void *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++) free(p[i]);
}

char **strv_dup(char *const *v)
{
    size_t n = strv_len(v);
    char **r = xcalloc(n + 1, sizeof *r);
    for (size_t i = 0; i < n; i++) r[i] = xstrdup(v[i]);
    return r;
}

int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t wall_s(void)
{
    return (int64_t)time(NULL);
}

void sbuf_init(sbuf_t *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
}

void sbuf_free(sbuf_t *b)
{
    free(b->data);
    sbuf_init(b);
}

void sbuf_reset(sbuf_t *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

void sbuf_reserve(sbuf_t *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void sbuf_append(sbuf_t *b, const void *p, size_t n)
{
    sbuf_reserve(b, n);
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void sbuf_puts(sbuf_t *b, const char *s)
{
    sbuf_append(b, s, strlen(s));
}

void sbuf_putc(sbuf_t *b, char c)
{
    sbuf_append(b, &c, 1);
}

void sbuf_printf(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    sbuf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sbuf_json_str_or_null(sbuf_t *b, const char *s)
{
    if (s)
        sbuf_json_str(b, s, strlen(s));
    else
        sbuf_puts(b, "null");
}

void sbuf_json_str(sbuf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    sbuf_reserve(b, n + 2);
    sbuf_putc(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        sbuf_append(b, s + start, i - start);
        start = i + 1;
        switch (c) {
        case '"': sbuf_puts(b, "\\\""); break;
        case '\\': sbuf_puts(b, "\\\\"); break;
        case '\n': sbuf_puts(b, "\\n"); break;
        case '\r': sbuf_puts(b, "\\r"); break;
        case '\t': sbuf_puts(b, "\\t"); break;
        default: {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            sbuf_append(b, esc, 6);
        }
        }
    }
    sbuf_append(b, s + start, n - start);
    sbuf_putc(b, '"');
}

/* ------------------------------------------------------------ UTF-8 */

/* The bounds of a sequence's second byte, by its first (Unicode Table 3-7);
 * 0 when the byte does not start a sequence of more than one byte. */
static int utf8_second(unsigned char c, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80, *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c == 0xE0) *lo = 0xA0;
    if (c == 0xED) *hi = 0x9F;   /* no surrogates */
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c == 0xF0) *lo = 0x90;
    if (c == 0xF4) *hi = 0x8F;   /* nothing past U+10FFFF */
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* The length of the well-formed character at s (1..4), or minus the
 * length of the maximal ill-formed subpart there (-1..-3). n > 0. */
static int utf8_next(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80) return 1;
    unsigned char lo, hi;
    int want = utf8_second(s[0], &lo, &hi);
    if (!want) return -1;
    int k = 1;
    for (; k < want; k++) {
        if ((size_t)k >= n || s[k] < lo || s[k] > hi) return -k;
        lo = 0x80, hi = 0xBF;
    }
    return want;
}

bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int k = utf8_next(u + i, n - i);
        if (k < 0) return false;
        i += (size_t)k;
    }
    return true;
}

int sbuf_utf8(sbuf_t *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    int bad = 0;
    size_t start = 0, i = 0;
    sbuf_reserve(b, n);
    while (i < n) {
        int k = u[i] < 0x80 ? 1 : utf8_next(u + i, n - i);
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        sbuf_append(b, s + start, i - start);
        sbuf_puts(b, UTF8_REPLACEMENT);
        bad++;
        i += (size_t)-k;
        start = i;
    }
    sbuf_append(b, s + start, n - start);
    return bad;
}

char *utf8_repair(const char *s, size_t n, size_t *outlen)
{
    sbuf_t b;
    sbuf_init(&b);
    sbuf_utf8(&b, s, n);
    if (outlen) *outlen = b.len;
    return sbuf_steal(&b);
}

int utf8_repair_inplace(char **s)
{
    if (!*s) return 0;
    size_t n = strlen(*s);
    if (utf8_valid(*s, n)) return 0;
    sbuf_t b;
    sbuf_init(&b);
    int bad = sbuf_utf8(&b, *s, n);
    free(*s);
    *s = sbuf_steal(&b);
    return bad;
}

int utf8_scrub(char *buf, size_t cap)
{
    if (!cap) return 0;
    buf[cap - 1] = '\0';
    unsigned char *u = (unsigned char *)buf;
    size_t n = strlen(buf);
    int bad = 0;
    for (size_t i = 0; i < n;) {
        int k = u[i] < 0x80 ? 1 : utf8_next(u + i, n - i);
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        for (int j = 0; j < -k; j++, bad++) u[i++] = '?';
    }
    return bad;
}

size_t utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max) return n;
    while (max && ((unsigned char)s[max] & 0xC0) == 0x80) max--; /* not inside a character */
    return max;
}

/* A byte a terminal or a log reader could take as a control: C0 but the
 * kept newline and tab, and DEL. */
static bool ctl_byte(unsigned char c, unsigned flags)
{
    if ((flags & TEXT_KEEP_NEWLINES) && (c == '\n' || c == '\t')) return false;
    return c < 0x20 || c == 0x7f;
}

static void put_hex(sbuf_t *b, const unsigned char *u, size_t n)
{
    for (size_t j = 0; j < n; j++) sbuf_printf(b, "\\x%02x", u[j]);
}

int sbuf_text(sbuf_t *b, const char *s, size_t n, unsigned flags)
{
    const unsigned char *u = (const unsigned char *)s;
    int escaped = 0;
    size_t start = 0, i = 0;
    sbuf_reserve(b, n);
    while (i < n) {
        int k = u[i] < 0x80 ? (ctl_byte(u[i], flags) ? -1 : 1) : utf8_next(u + i, n - i);
        bool c1 = k == 2 && u[i] == 0xC2 && u[i + 1] < 0xA0; /* U+0080..U+009F, C1 as UTF-8 */
        if (k > 0 && !c1) {
            i += (size_t)k;
            continue;
        }
        size_t bad = c1 ? 2 : (size_t)-k; /* a control, or an ill-formed subpart */
        sbuf_append(b, s + start, i - start);
        put_hex(b, u + i, bad);
        escaped += (int)bad;
        i += bad;
        start = i;
    }
    sbuf_append(b, s + start, n - start);
    return escaped;
}

char *text_escape(const char *s, size_t n, unsigned flags)
{
    sbuf_t b;
    sbuf_init(&b);
    sbuf_text(&b, s ? s : "", s ? n : 0, flags);
    return sbuf_steal(&b);
}

char *sbuf_steal(sbuf_t *b)
{
    char *p = b->data ? b->data : xstrdup("");
    sbuf_init(b);
    return p;
}

void sbuf_consume(sbuf_t *b, size_t n)
{
    if (n >= b->len) {
        sbuf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

bool parse_long(const char *s, long *out)
{
    char *end;
    if (!s || !*s) return false;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool parse_double(const char *s, double *out)
{
    char *end;
    if (!s || !*s) return false;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

int edit_distance(const char *a, const char *b, int cap)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return cap + 1;
    int prev[65], cur[65];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        int best = cur[0];
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int v = prev[j - 1] + cost;
            if (prev[j] + 1 < v) v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            cur[j] = v;
            if (v < best) best = v;
        }
        if (best > cap) return cap + 1;
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb] > cap ? cap + 1 : prev[lb];
}

void random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            /* Cannot happen on Linux >= 3.17 with a sane buffer; never leave it unset. */
            for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(rand() & 0xff);
            return;
        }
        p += r;
        n -= (size_t)r;
    }
}

/* Job uuids and ids need uniqueness, not secrecy, and are made on the job
 * path: a xoshiro256** generator seeded from getrandom(2), reseeded in every
 * forked child (so two workers never share a sequence). */
static struct {
    uint64_t s[4];
    bool seeded;
} R;

static void reseed_after_fork(void)
{
    R.seeded = false;
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t fast_random(void)
{
    if (!R.seeded) {
        static bool registered;
        if (!registered) {
            pthread_atfork(NULL, NULL, reseed_after_fork);
            registered = true;
        }
        do
            random_bytes(R.s, sizeof R.s);
        while (!(R.s[0] | R.s[1] | R.s[2] | R.s[3]));
        R.seeded = true;
    }
    uint64_t result = rotl(R.s[1] * 5, 7) * 9, t = R.s[1] << 17;
    R.s[2] ^= R.s[0];
    R.s[3] ^= R.s[1];
    R.s[1] ^= R.s[2];
    R.s[0] ^= R.s[3];
    R.s[2] ^= t;
    R.s[3] = rotl(R.s[3], 45);
    return result;
}

static void fast_bytes(unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = fast_random();
        for (size_t j = 0; j < 8 && i + j < n; j++) b[i + j] = (unsigned char)(v >> (8 * j));
    }
}

void uuid4(char out[37])
{
    unsigned char b[16];
    static const char hex[] = "0123456789abcdef";
    fast_bytes(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    int o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

void random_alnum(char *out, size_t n)
{
    static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char b[64];
    size_t done = 0;
    while (done < n) {
        size_t k = n - done > sizeof b ? sizeof b : n - done;
        fast_bytes(b, k);
        for (size_t i = 0; i < k; i++) out[done + i] = set[b[i] % 62];
        done += k;
    }
    out[n] = '\0';
}

int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int set_nonblock(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    return fcntl(fd, F_SETFL, fl);
}

const char *utc_text(double secs, char *buf, size_t n)
{
    struct tm tm;
    time_t s = (time_t)(isfinite(secs) && fabs(secs) < 1e12 ? secs : 0);
    if (!isfinite(secs) || fabs(secs) >= 1e12 || !gmtime_r(&s, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(buf, n, "-");
    return buf;
}
