/*
 * cli_import.c - `qpool import horizon APP [--env ENV]` (horizon.h).
 */
#include "cli/cli.h"
#include "config/appdesc.h"
#include "config/horizon.h"
#include "core/util.h"

#include <getopt.h>
#include <stddef.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *app, *env, *adapter, *user;
    const char *php_arg; /* --php, the last one */
    char **php;          /* its words, or "php" */
} import_opts_t;

#define I(m) offsetof(import_opts_t, m)
static const cli_opt_t OPTS[] = {
    CLI_STR("env", 'e', I(env)),
    CLI_STR("php", 'p', I(php_arg)),
    CLI_STR("adapter", 'a', I(adapter)),
    CLI_STR("user", 'u', I(user)),
    CLI_OPTS_END,
};
#undef I

/* --php "chroot /root php": split on blanks. */
static char **split_words(const char *s)
{
    char **v = xcalloc(strlen(s) / 2 + 2, sizeof *v);
    char *copy = xstrdup(s), *save = NULL;
    int n = 0;
    for (char *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) v[n++] = xstrdup(t);
    free(copy);
    return v;
}

/* 0: go on; -1: stop with exit status *status. */
static int parse_import(const cli_cmd_t *cmd, int argc, char **argv, import_opts_t *o, int *status)
{
    if (cli_parse(cmd, argc, argv, "e:u:h", OPTS, o, "invalid option", status) < 0) return -1;
    *status = EXIT_USAGE;
    if (argc - optind != 2 || strcmp(argv[optind], "horizon")) {
        cli_usage_error("import", "expected: qpool import horizon APP");
        return -1;
    }
    o->app = argv[optind + 1];
    if (o->app[0] != '/') {
        cli_usage_error("import", "APP must be an absolute path");
        return -1;
    }
    if (geteuid() == 0 && !o->user) {
        cli_usage_error("import", "reading the app runs its code: as root, name the user to run it as with "
                                  "--user USER (the app's owner, or the pools' user)");
        return -1;
    }
    if (o->php_arg) o->php = split_words(o->php_arg);
    if (!o->php || !o->php[0]) {
        free_strv(o->php);
        o->php = split_words("php");
    }
    return 0;
}

/* --user: the app is read as that user (a root `qpool import` never boots
 * an app as root). */
static int run_as(pool_conf_t *p, const char *user)
{
    struct passwd *pw = getpwnam(user);
    if (!pw) {
        fprintf(stderr, "qpool import: no user %s\n", user);
        return -1;
    }
    p->user = (char *)user;
    p->uid = pw->pw_uid;
    p->gid = pw->pw_gid;
    p->has_uid = p->has_gid = true;
    return 0;
}

/* The app's horizon config from the adapter, as JSON. */
static cJSON *describe_horizon(const import_opts_t *o)
{
    size_t np = strv_len(o->php);
    char **argv = xcalloc(np + 4, sizeof *argv);
    for (size_t i = 0; i < np; i++) argv[i] = o->php[i];
    argv[np] = (char *)(o->adapter ? o->adapter : appdesc_default_adapter());
    argv[np + 1] = "--describe-horizon";
    argv[np + 2] = (char *)o->app;
    pool_conf_t none;
    memset(&none, 0, sizeof none);
    none.name = "import";
    if (o->user && run_as(&none, o->user) < 0) {
        free(argv);
        return NULL;
    }
    char *text = NULL, err[600];
    size_t len = 0;
    cJSON *d = NULL;
    if (appdesc_run(argv, &none, APPDESC_TIMEOUT_S, &text, &len, err, sizeof err) < 0)
        fprintf(stderr, "qpool import: cannot read the Laravel app %s: %s\n", o->app, err);
    else if (!(d = cJSON_ParseWithLength(text, len)) || !cJSON_IsObject(d))
        fprintf(stderr, "qpool import: the adapter's answer for %s is not JSON\n", o->app);
    free(text);
    free(argv);
    if (d && !cJSON_IsObject(d)) {
        cJSON_Delete(d);
        d = NULL;
    }
    return d;
}

int cmd_import(const cli_cmd_t *cmd, int argc, char **argv)
{
    import_opts_t o = {0};
    int status;
    if (parse_import(cmd, argc, argv, &o, &status) < 0) {
        free_strv(o.php);
        return status;
    }
    cJSON *d = describe_horizon(&o);
    free_strv(o.php);
    if (!d) return 1;
    sbuf_t out;
    sbuf_init(&out);
    char err[300];
    int rc = horizon_import(d, o.app, o.env, &out, err, sizeof err);
    cJSON_Delete(d);
    if (rc < 0)
        fprintf(stderr, "qpool import: %s\n", err);
    else
        fputs(out.data ? out.data : "", stdout);
    sbuf_free(&out);
    return rc < 0 ? 1 : 0;
}
