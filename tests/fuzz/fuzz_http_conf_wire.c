/*
 * fuzz_http_conf_wire.c - libFuzzer harness: the settings the HTTP process
 * reads on its descriptor 5 (http_wire_decode, src/config/http_conf_wire.h). They
 * come from the master, but the process checks them all the same: taken
 * only whole and in range, or refused with a reason; what is taken encodes
 * to a text that decodes to the same text again.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "config/http_conf_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    http_wire_t w, again;
    char err[400];
    err[0] = '\0';
    if (http_wire_decode((const char *)data, size, &w, err, sizeof err) < 0) {
        if (!err[0] || w.http.listen || w.redis.name || w.token) abort(); /* a reason, nothing kept */
        return 0;
    }
    if (!w.http.listen || !w.redis.name || !w.queues || w.parent < 1) abort();
    if (w.http.port < 0 || w.http.port > 65535 || w.http.max_connections < 1) abort();
    size_t len, len2;
    char *text = http_wire_encode(&w, &len);
    if (!text || http_wire_decode(text, len, &again, err, sizeof err) < 0) abort();
    char *text2 = http_wire_encode(&again, &len2);
    if (!text2 || len2 != len || memcmp(text, text2, len)) abort();
    http_wire_text_free(text, len);
    http_wire_text_free(text2, len2);
    http_wire_free(&again);
    http_wire_free(&w);
    return 0;
}
