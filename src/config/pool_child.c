/*
 * pool_child.c - see pool_child.h.
 */
#include "config/pool_child.h"
#include "core/log.h"
#include "os/proc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int child_spec_pool(child_spec_t *s, const pool_conf_t *p, pid_t parent, int deathsig, int keep_fd)
{
    memset(s, 0, sizeof *s);
    snprintf(s->who, sizeof s->who, "pool %s", p->name);
    s->parent = parent;
    s->deathsig = deathsig;
    s->own_group = true;
    if (keep_fd >= 0) /* a worker's stats channel: no handler inherits it */
        s->fds[s->nfds++] = (child_fd_t){.from = keep_fd, .to = PROC_KEEP_FD, .cloexec = true};
    s->nice = p->nice;
    s->dir = p->working_directory;
    for (int i = 0; i < p->nenv; i++) child_env_put(&s->env, p->env[i].name, p->env[i].value);
    uid_t uid = p->uid;
    gid_t gid = p->gid;
    s->ids = child_ids_plan(geteuid(), getegid(), p->has_uid, &uid, p->has_gid, &gid);
    if (s->ids == CHILD_IDS_SWITCH && child_spec_user(s, p->user, uid, gid, p->has_uid) < 0) {
        log_error("pool %s: the groups of %s: %s", p->name, p->user, strerror(errno ? errno : ENOENT));
        child_spec_free(s);
        return -1;
    }
    s->uid = uid;
    s->gid = gid;
    return 0;
}
