/*
 * fuzz_agent_wire.c - libFuzzer harness: the reply lines a pool's app agent
 * writes to its master (agent_wire_parse, src/master/agent_wire.h). The
 * agent runs the app's code: its lines are taken only whole, typed and in
 * range, or refused with a reason. The first byte picks the op and the
 * number of queues asked.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/agent_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    enum agent_op op = (enum agent_op)(data[0] % AGENT_NOPS);
    int nq = (data[0] >> 2) % (AGENT_QUEUES_MAX + 2);
    agent_reply_t r;
    char err[128];
    err[0] = '\0';
    if (agent_wire_parse((const char *)data + 1, size - 1, op, nq, &r, err, sizeof err) < 0) {
        if (!err[0]) abort(); /* a reason */
        return 0;
    }
    if (nq > AGENT_QUEUES_MAX && r.ok && (op == AGENT_OP_SIGNALS || op == AGENT_OP_SIZES)) abort(); /* per queue asked */
    if (op == AGENT_OP_HELLO && (r.id != 0 || (r.ok && r.pid < 2))) abort();
    if (op != AGENT_OP_HELLO && (r.id < 1 || r.id > AGENT_ID_MAX)) abort();
    if (strlen(r.restart) > AGENT_VALUE_MAX || strlen(r.error) >= sizeof r.error) abort();
    if (r.ok && op == AGENT_OP_SIGNALS && r.npaused != nq) abort();
    if (r.ok && op == AGENT_OP_BATCHES) {
        if (!r.batches || r.nbatches > AGENT_BATCHES_MAX) abort();
        if (!utf8_valid(r.batches, strlen(r.batches))) abort(); /* shown as it is */
    }
    if (r.ok && (op == AGENT_OP_BATCH_RETRY || op == AGENT_OP_BATCH_FAILED)) {
        if (!agent_batch_id_ok(r.batch)) abort();
        for (int i = 0; i < r.nretried; i++)
            if (!agent_batch_id_ok(r.retried[i])) abort();
        for (int i = 0; i < r.nmissing; i++)
            if (!agent_batch_id_ok(r.missing[i])) abort();
    }
    if (r.ok && op == AGENT_OP_SIZES) {
        if (r.nsizes != nq) abort();
        for (int i = 0; i < r.nsizes; i++)
            if (r.ready[i] < 0 || r.delayed[i] < -1 || r.reserved[i] < -1) abort();
    }
    agent_reply_free(&r);
    return 0;
}
