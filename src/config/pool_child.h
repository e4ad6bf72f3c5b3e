/*
 * pool_child.h - a pool's child as os/child.h sets it up, from the pool's
 * settings: the one bridge from the configuration to process set-up, so
 * that os/ needs nothing of config/.
 */
#ifndef QPOOL_POOL_CHILD_H
#define QPOOL_POOL_CHILD_H

#include <sys/types.h>

#include "config/config.h"
#include "os/child.h"

/* A pool's child (worker, external command, app description): nice,
 * environment, user and group, working directory; keep_fd (>= 0) becomes
 * PROC_KEEP_FD, close-on-exec. Returns 0, -1 with a message logged. */
int child_spec_pool(child_spec_t *s, const pool_conf_t *p, pid_t parent, int deathsig, int keep_fd);
#endif
