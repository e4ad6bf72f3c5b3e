/*
 * main.c - the qpool binary. All the work is in cli.c and the modules it
 * calls; this only prepares the process title area (setproctitle needs the
 * original argv/environ before anything else touches them).
 */
#include "cli/cli.h"
#include "os/proc.h"

#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
    proc_title_init(argc, argv, environ);
    return cli_main(argc, argv);
}
