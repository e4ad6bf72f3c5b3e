/*
 * fuzz_control.c - libFuzzer harness: control-socket request lines
 * (ctl_parse_request, src/control.h), the part of the socket that reads
 * what a client sends. A line is accepted as one known command with
 * arguments in range, or refused with a reason; never a crash or a leak.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "master/control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ctl_request_t r;
    char err[256];
    err[0] = '\0';
    if (ctl_parse_request((const char *)data, size, 64, &r, err, sizeof err) < 0) {
        if (!err[0]) abort(); /* a refusal always says why */
        return 0;
    }
    if (r.cmd >= CTL_NCMDS) abort();
    if (r.cmd == CTL_SCALE && (!r.pool || r.n < -1 || r.n > 64)) abort();
    for (int i = 0; i < r.npools; i++)
        if (!r.pools[i]) abort();
    for (int i = 0; i < r.nqueues; i++)
        if (!r.queues[i]) abort();
    (void)ctl_cmd_name(r.cmd);
    ctl_request_free(&r);
    return 0;
}
