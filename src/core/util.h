/*
 * util.h - small helpers shared by every module: allocation that aborts on
 * failure (a daemon that cannot allocate a few bytes cannot do anything
 * sensible), clocks, a growable byte buffer, and string utilities.
 */
#ifndef QPOOL_UTIL_H
#define QPOOL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define UNUSED(x) ((void)(x))

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void free_strv(char **v);            /* NULL-terminated vector */
char **strv_dup(char *const *v);
size_t strv_len(char *const *v);
bool str_eq(const char *a, const char *b);         /* strcmp() == 0; NULL equals only NULL */
bool strv_eq(char *const *a, char *const *b);      /* the same for NULL-terminated vectors */
char *xstrdup_or_null(const char *s);              /* NULL stays NULL */
void free_wiped(char *s);                          /* zero a secret string, then free it */
/* free() each pointer given: FREE_ALL(p->a, p->b, p->c). */
#define FREE_ALL(...) free_all((void *[]){__VA_ARGS__}, sizeof((void *[]){__VA_ARGS__}) / sizeof(void *))
void free_all(void *const *p, size_t n);

int64_t mono_ms(void);               /* CLOCK_MONOTONIC, milliseconds */
double mono_s(void);
int64_t wall_ms(void);               /* CLOCK_REALTIME, milliseconds */
int64_t wall_s(void);

/* Growable buffer; always NUL-terminated, may also hold binary data. */
typedef struct {
    char *data;
    size_t len, cap;
} sbuf_t;

void sbuf_init(sbuf_t *b);
void sbuf_free(sbuf_t *b);
void sbuf_reset(sbuf_t *b);
void sbuf_reserve(sbuf_t *b, size_t extra);
void sbuf_append(sbuf_t *b, const void *p, size_t n);
void sbuf_puts(sbuf_t *b, const char *s);
void sbuf_putc(sbuf_t *b, char c);
void sbuf_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append s as a JSON string literal (with quotes). n bytes, binary-safe. */
void sbuf_json_str(sbuf_t *b, const char *s, size_t n);
void sbuf_json_str_or_null(sbuf_t *b, const char *s); /* a JSON string, or null for NULL */
char *sbuf_steal(sbuf_t *b);
/* Drop the first n bytes. */
void sbuf_consume(sbuf_t *b, size_t n);

/* UTF-8. Text that leaves qpool (metrics, the JSON API, logs, Redis
 * records) is valid UTF-8: what comes from a payload is repaired where it
 * enters. Repair replaces each maximal ill-formed subpart (Unicode's
 * "substitution of maximal subparts", as WHATWG decoders do) with U+FFFD;
 * valid text, U+0000 included, is kept byte for byte. */
#define UTF8_REPLACEMENT "\xEF\xBF\xBD"
bool utf8_valid(const char *s, size_t n);
/* Append s[0..n) to b, repaired. The count of replacements made. */
int sbuf_utf8(sbuf_t *b, const char *s, size_t n);
/* A repaired copy of s[0..n), NUL-terminated (*outlen: its length; may be
 * NULL). Caller frees. */
char *utf8_repair(const char *s, size_t n, size_t *outlen);
/* Repair the NUL-terminated *s in place (reallocated when it must grow).
 * The count of replacements made. */
int utf8_repair_inplace(char **s);
/* Make the text in buf[0..cap) a valid NUL-terminated UTF-8 string in
 * place, whatever it held: terminated at cap - 1, every byte of an
 * ill-formed subpart turned into '?'. For fixed buffers another process
 * writes (the scoreboard). The count of bytes changed. */
int utf8_scrub(char *buf, size_t cap);
/* The longest length <= max at which s[0..n) can be cut without splitting
 * a character (s valid UTF-8). */
size_t utf8_cut(const char *s, size_t n, size_t max);

/* Text for a terminal or a log line, whatever bytes it held (a job's
 * name, an exception, a queue name: a producer's or job code's choice):
 * valid UTF-8 stays as it is, and each byte of a control (C0, DEL, C1 as
 * U+0080..U+009F) or of an ill-formed subpart (a raw 0x80..0xff byte: C1
 * to an 8-bit terminal) becomes "\xHH". No newline, no ESC, no fake row
 * gets through. TEXT_KEEP_NEWLINES keeps '\n' and '\t' (a field meant to
 * span lines: an exception's trace). The backslash stays as it is (job
 * classes are App\Jobs\X). The count of bytes escaped. */
#define TEXT_KEEP_NEWLINES 1u
int sbuf_text(sbuf_t *b, const char *s, size_t n, unsigned flags);
/* The same as a new NUL-terminated string (NULL: ""). Caller frees. */
char *text_escape(const char *s, size_t n, unsigned flags);

/* Parse a whole decimal integer / number; false on garbage or overflow. */
bool parse_long(const char *s, long *out);
bool parse_double(const char *s, double *out);

/* Levenshtein distance, capped at 'cap' (returns cap+1 if larger). */
int edit_distance(const char *a, const char *b, int cap);

/* Random bytes (getrandom); uuid v4 into out[37]. */
void random_bytes(void *buf, size_t n);
void uuid4(char out[37]);
void random_alnum(char *out, size_t n); /* n chars + NUL */

/* Write all bytes, retrying on EINTR/short writes; -1 on error. */
int write_all(int fd, const void *p, size_t n);
int set_nonblock(int fd, bool on);

/* UNIX seconds as "YYYY-MM-DD HH:MM:SS" (UTC) into buf (20 bytes or more),
 * or "-" for a time out of range (a forged entry, a row's odd value): never
 * a cast that overflows, never gmtime's NULL. buf. */
const char *utc_text(double secs, char *buf, size_t n);

#endif
