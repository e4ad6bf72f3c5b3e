/*
 * fuzz_config.c - libFuzzer harness: the config loader (src/config.c) on
 * arbitrary files. Each input is written to a private temporary file and
 * loaded; the loader must accept it or report errors with a line, never
 * crash or leak. Inputs with @include are skipped: an include reads
 * another file by name, which is the operator's choice, not input. So are
 * inputs with `laravel`: a pool's app is read by running a command.
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "core/log.h"

static char path[64];

static void cleanup(void)
{
    if (path[0]) unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (memmem(data, size, "@include", 8)) return 0;
    /* laravel = ... runs the php command a config names (config_app.c):
     * which command runs is the operator's choice, not input */
    if (memmem(data, size, "laravel", 7)) return 0;
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/qpool-fuzz-config-%d.conf", (int)getpid());
        atexit(cleanup);
    }
    FILE *f = fopen(path, "we");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    conf_errors_t errs = {0};
    qconf_t *c = config_load(path, &errs);
    if (c) {
        if (errs.n) abort(); /* a config with errors is never returned */
        config_free(c);
    } else if (!errs.n)
        abort(); /* a refusal always says why */
    conf_errors_free(&errs);
    return 0;
}
