/*
 * fuzz_pipe_response.c - libFuzzer harness: pipe-handler response lines
 * (handler_parse_line, src/handler.h) in both protocol versions, with the
 * outstanding request id taken from the input. Whatever a handler writes,
 * the parser must not crash, leak or read out of bounds, and a line it takes
 * as a response must name the outstanding request (protocol 2).
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/handler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    int proto = data[0] & 1 ? 2 : 1;
    uint64_t seq = data[1];
    const char *line = (const char *)data + 2;
    size_t len = size - 2;
    hresult_t res;
    char why[160];
    int rv = handler_parse_line(line, len, proto, seq, &res, why, sizeof why);
    if (rv == 1 && res.kind > HRES_POPPED) abort();
    if (rv == 1 && res.has_delay && res.delay < 0) abort();
    hresult_free(&res);
    return 0;
}
