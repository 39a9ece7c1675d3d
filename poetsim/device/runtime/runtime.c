/* runtime.c: one training step, instruction by instruction, as the schedule says.
 *
 * The semantics are poetsim's (poetsim/schedule/model.py), checked as the step runs, so a
 * schedule that breaks them stops with a status naming the stage, the instruction and the node:
 * - PageOut(i) copies i's output to its slot in storage; it is on storage from the next stage.
 * - PageIn(i) reads it back into a new allocation, usable from the next stage. Under `overlap`
 *   timing the allocation and copy happen when it is issued (its bytes are held from then);
 *   under `compute-only` at the end of the stage, after its frees (held from the next stage).
 * - Compute(k) allocates k's output and runs its kernel on its operands, which must be in RAM.
 * - Free(i) releases i's output, except that under `overlap` an output being paged out in this
 *   stage keeps its bytes until the stage ends (the transfer may run until then).
 * RAM is the arena (arena.h): its peak is the largest sum of live allocations, the quantity the
 * checker (poetsim/schedule/checker.py) predicts.
 */
#include <string.h>

#include "arena.h"
#include "decode.h"
#include "kernels.h"
#include "poet.h"
#include "program.h"

#define NO_NODE UINT32_MAX

typedef struct {
    poet_program p;
    poet_arena arena;
    poet_result *r;
    uint32_t overlap;
    uint32_t slot[POET_MAX_NODES]; /* each node's offset in storage */
    uint8_t resident[POET_MAX_NODES];
    uint8_t stored[POET_MAX_NODES];
    uint8_t paging_out[POET_MAX_NODES];
    uint8_t paging_in[POET_MAX_NODES];
    uint8_t deferred[POET_MAX_NODES]; /* frees while being paged out this stage: bytes held to its end */
    uint16_t outs[POET_MAX_NODES];
    uint16_t ins[POET_MAX_NODES];
    uint32_t n_outs, n_ins;
    uint64_t compute_ticks, transfer_ticks, compact_ticks;
} machine;

static machine M;

static void add64(uint32_t *lo, uint32_t *hi, uint64_t value)
{
    uint64_t sum = ((uint64_t)*hi << 32 | *lo) + value;
    *lo = (uint32_t)sum;
    *hi = (uint32_t)(sum >> 32);
}

static float *tensor(uint32_t node)
{
    return (float *)(void *)poet_arena_at(&M.arena, node);
}

static float *weight_grads(const poet_node *nd)
{
    return M.p.grads + nd->param_offset;
}

/* Run node k's operation into its freshly allocated output. */
static int run_kernel(uint32_t k)
{
    const poet_node *nd = &M.p.nodes[k];
    const uint32_t *d = nd->dims;
    const float *g[POET_MAX_OPERANDS];
    for (uint32_t i = 0; i < nd->n_grads; ++i) {
        g[i] = tensor(nd->operands[i]);
    }
    const uint32_t *in = nd->operands + nd->n_grads;
    float *out = nd->output_bytes ? tensor(k) : NULL;
    const float *w = nd->param_offset != POET_NO_PARAMS ? M.p.weights + nd->param_offset : NULL;
    int bias = (nd->flags & POET_FLAG_BIAS) != 0u;
    switch (nd->kind) {
    case POET_INPUT:
        memcpy(out, M.p.batch, nd->output_bytes);
        return POET_OK;
    case POET_LINEAR:
        poet_linear(tensor(in[0]), w, bias ? w + d[2] * d[1] : NULL, out, d[0], d[1], d[2]);
        return POET_OK;
    case POET_LINEAR_GRAD: {
        float *dw = weight_grads(nd);
        poet_linear_grad(g, nd->n_grads, tensor(in[0]), w, dw, bias ? dw + d[2] * d[1] : NULL, out, d[0], d[1], d[2]);
        return POET_OK;
    }
    case POET_CONV:
    case POET_CONV_GRAD: {
        poet_conv_shape s = {d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10]};
        uint32_t weights = d[4] * (d[1] / d[10]) * d[7] * d[7];
        if (nd->kind == POET_CONV) {
            poet_conv(tensor(in[0]), w, bias ? w + weights : NULL, out, &s);
        } else {
            float *dw = weight_grads(nd);
            poet_conv_grad(g, nd->n_grads, tensor(in[0]), w, dw, bias ? dw + weights : NULL, out, &s);
        }
        return POET_OK;
    }
    case POET_RELU:
        poet_relu(tensor(in[0]), out, d[0]);
        return POET_OK;
    case POET_RELU_GRAD:
        poet_relu_grad(g, nd->n_grads, tensor(in[0]), out, d[0]);
        return POET_OK;
    case POET_ADD:
        poet_add(tensor(in[0]), tensor(in[1]), out, d[0]);
        return POET_OK;
    case POET_ADD_GRAD:
        poet_add_grad(g, nd->n_grads, out, d[0]);
        return POET_OK;
    case POET_MAXPOOL:
    case POET_MAXPOOL_GRAD: {
        poet_pool_shape s = {d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]};
        uint32_t pooled = d[0] * d[3] * d[4];
        if (nd->kind == POET_MAXPOOL) {
            poet_maxpool(tensor(in[0]), out, (uint32_t *)(void *)(out + pooled), &s);
            return POET_OK;
        }
        const uint32_t *index = (const uint32_t *)(const void *)(tensor(in[1]) + pooled);
        return poet_maxpool_grad(g, nd->n_grads, index, out, &s) ? POET_E_INDEX : POET_OK;
    }
    case POET_RELU6:
        poet_relu6(tensor(in[0]), out, d[0]);
        return POET_OK;
    case POET_RELU6_GRAD:
        poet_relu6_grad(g, nd->n_grads, tensor(in[0]), out, d[0]);
        return POET_OK;
    case POET_BATCHNORM:
        poet_batchnorm(tensor(in[0]), w, w + d[1], out, d[0], d[1], d[2]);
        return POET_OK;
    case POET_BATCHNORM_GRAD: {
        float *dw = weight_grads(nd);
        poet_batchnorm_grad(g, nd->n_grads, tensor(in[0]), w, dw, dw + d[1], out, d[0], d[1], d[2]);
        return POET_OK;
    }
    case POET_AVGPOOL:
        poet_avgpool(tensor(in[0]), out, d[0], d[1]);
        return POET_OK;
    case POET_AVGPOOL_GRAD:
        poet_avgpool_grad(g, nd->n_grads, out, d[0], d[1]);
        return POET_OK;
    case POET_LOSS:
    case POET_LOSS_GRAD: {
        const int32_t *labels = (const int32_t *)(const void *)((const uint8_t *)tensor(in[1]) + d[2]);
        int bad = nd->kind == POET_LOSS ? poet_loss(tensor(in[0]), labels, out, d[0], d[1])
                                        : poet_loss_grad(tensor(in[0]), labels, out, d[0], d[1]);
        if (!bad && nd->kind == POET_LOSS) {
            uint32_t rows = d[0] < POET_MAX_LOSS_ROWS ? d[0] : POET_MAX_LOSS_ROWS;
            memcpy(M.r->loss_bits, out, rows * sizeof(float));
            M.r->loss_rows = rows;
        }
        return bad ? POET_E_LABEL : POET_OK;
    }
    default:
        return POET_E_PROGRAM; /* unreachable: program.c refused unknown kinds */
    }
}

static int allocate(uint32_t node, uint32_t size)
{
    int status = poet_arena_alloc(&M.arena, node, size);
    if (status == POET_E_ARENA_FULL) {
        M.r->err_a = size;
        M.r->err_b = M.arena.live;
    }
    return status;
}

static int compute(uint32_t t, uint32_t k, uint32_t last)
{
    const poet_node *nd = &M.p.nodes[k];
    if (k > t || (last != NO_NODE && k <= last)) {
        return POET_E_COMPUTE_ORDER;
    }
    if (M.resident[k] || M.paging_in[k]) {
        return POET_E_RESIDENT;
    }
    for (uint32_t i = 0; i < nd->n_grads + nd->n_inputs; ++i) {
        if (!M.resident[nd->operands[i]]) {
            M.r->err_a = nd->operands[i];
            return POET_E_INPUT_MISSING;
        }
    }
    uint32_t t0 = poet_clock();
    int status = allocate(k, nd->output_bytes);
    uint32_t t1 = poet_clock();
    if (status == POET_OK) {
        status = run_kernel(k);
    }
    uint32_t t2 = poet_clock();
    if (status != POET_OK) {
        return status;
    }
    M.resident[k] = 1;
    M.compact_ticks += t1 - t0;
    M.compute_ticks += t2 - t1;
    poet_node_stats *st = &M.r->nodes[k];
    if (k == t) {
        st->first_ticks += t2 - t1;
        M.r->computes++;
    } else {
        st->recompute_ticks += t2 - t1;
        st->recomputes++;
        M.r->recomputations++;
    }
    return POET_OK;
}

static int page_out(uint32_t i)
{
    if (!M.resident[i]) {
        return POET_E_NOT_RESIDENT;
    }
    if (M.paging_out[i]) {
        return POET_E_TWICE;
    }
    uint32_t bytes = M.p.nodes[i].output_bytes;
    uint32_t t0 = poet_clock();
    memcpy(M.p.storage + M.slot[i], poet_arena_at(&M.arena, i), bytes);
    uint32_t t1 = poet_clock();
    M.paging_out[i] = 1;
    M.outs[M.n_outs++] = (uint16_t)i;
    M.transfer_ticks += t1 - t0;
    M.r->nodes[i].page_out_ticks += t1 - t0;
    M.r->page_outs++;
    M.r->page_out_bytes += bytes;
    return POET_OK;
}

/* Allocate node i and read it back from storage. */
static int land(uint32_t i)
{
    uint32_t bytes = M.p.nodes[i].output_bytes;
    uint32_t t0 = poet_clock();
    int status = allocate(i, bytes);
    uint32_t t1 = poet_clock();
    if (status != POET_OK) {
        return status;
    }
    memcpy(poet_arena_at(&M.arena, i), M.p.storage + M.slot[i], bytes);
    uint32_t t2 = poet_clock();
    M.compact_ticks += t1 - t0;
    M.transfer_ticks += t2 - t1;
    M.r->nodes[i].page_in_ticks += t2 - t1;
    M.r->page_ins++;
    M.r->page_in_bytes += bytes;
    return POET_OK;
}

static int page_in(uint32_t i)
{
    if (M.resident[i]) {
        return POET_E_RESIDENT;
    }
    if (!M.stored[i]) {
        return POET_E_NOT_STORED;
    }
    if (M.paging_in[i]) {
        return POET_E_TWICE;
    }
    M.paging_in[i] = 1;
    M.ins[M.n_ins++] = (uint16_t)i;
    return M.overlap ? land(i) : POET_OK;
}

static int release(uint32_t i)
{
    if (!M.resident[i]) {
        return POET_E_NOT_RESIDENT;
    }
    M.resident[i] = 0;
    if (M.overlap && M.paging_out[i] && M.deferred[i] < POET_DEFERRED_MAX) {
        M.deferred[i]++;
        poet_arena_rename(&M.arena, i, i + M.deferred[i] * POET_MAX_NODES);
    } else {
        poet_arena_free(&M.arena, i);
    }
    return POET_OK;
}

/* The stage ends: page-ins land, page-outs are on storage, deferred frees give their bytes back. */
static int close_stage(void)
{
    for (uint32_t n = 0; n < M.n_ins; ++n) {
        uint32_t i = M.ins[n];
        if (!M.overlap) {
            int status = land(i);
            if (status != POET_OK) {
                M.r->err_node = i;
                return status;
            }
        }
        M.paging_in[i] = 0;
        M.resident[i] = 1;
    }
    for (uint32_t n = 0; n < M.n_outs; ++n) {
        uint32_t i = M.outs[n];
        M.paging_out[i] = 0;
        M.stored[i] = 1;
        for (uint32_t d = 1; d <= M.deferred[i]; ++d) {
            poet_arena_free(&M.arena, i + d * POET_MAX_NODES);
        }
        M.deferred[i] = 0;
    }
    M.n_ins = M.n_outs = 0;
    return POET_OK;
}

static int execute(void)
{
    poet_decoder d;
    int status = poet_decode_begin(&d, M.p.schedule, M.p.schedule_bytes, M.p.num_nodes);
    for (uint32_t t = 0; status == POET_OK && t < d.num_stages; ++t) {
        uint64_t count;
        uint32_t phase = 0, last = NO_NODE;
        M.r->err_stage = t;
        status = poet_decode_stage(&d, &count);
        for (uint64_t n = 0; status == POET_OK && n < count; ++n) {
            poet_instruction ins;
            M.r->err_index = (uint32_t)n;
            status = poet_decode_next(&d, &ins);
            if (status != POET_OK) {
                break;
            }
            M.r->err_node = ins.node;
            switch (ins.op) {
            case POET_OP_PAGE_OUT:
                status = phase > 0u ? POET_E_ORDER : page_out(ins.node);
                break;
            case POET_OP_PAGE_IN:
                status = phase > 1u ? POET_E_ORDER : page_in(ins.node);
                phase = 1;
                break;
            case POET_OP_COMPUTE:
                phase = 2;
                status = compute(t, ins.node, last);
                last = ins.node;
                break;
            default: /* POET_OP_FREE */
                phase = 2;
                status = release(ins.node);
                break;
            }
        }
        if (status == POET_OK && last != t) {
            M.r->err_node = t;
            status = POET_E_LAST_COMPUTE;
        }
        if (status == POET_OK) {
            status = close_stage();
        }
    }
    return status == POET_OK ? poet_decode_end(&d) : status;
}

void poet_run(uint8_t *ext, uint32_t ext_bytes, uint8_t *arena, uint32_t arena_bytes, poet_result *r)
{
    memset(r, 0, sizeof(*r));
    memset(&M, 0, sizeof(M));
    r->magic = POET_RESULT_MAGIC;
    r->version = POET_RESULT_VERSION;
    r->arena_bytes = arena_bytes;
    M.r = r;
    uint32_t started = poet_clock();
    int status = poet_program_load(ext, ext_bytes, &M.p, &r->err_node, &r->err_b);
    if (status == POET_OK) {
        r->num_nodes = M.p.num_nodes;
        r->schedule_bytes = M.p.schedule_bytes;
        /* Storage slots, one per node: paging never runs out of space mid-step. */
        uint64_t at = 0;
        for (uint32_t i = 0; i < M.p.num_nodes; ++i) {
            M.slot[i] = (uint32_t)at;
            at += M.p.nodes[i].output_bytes;
        }
        if (at > M.p.storage_bytes) {
            r->err_b = POET_REGION_STORAGE;
            status = POET_E_IMAGE;
        }
    }
    if (status == POET_OK) {
        status = poet_decode_check(M.p.schedule, M.p.schedule_bytes, M.p.num_nodes, &r->timing, &r->err_a);
    }
    if (status == POET_OK) {
        M.overlap = r->timing;
        poet_arena_init(&M.arena, arena, arena_bytes);
        status = execute();
    }
    uint32_t ended = poet_clock();
    r->status = (uint32_t)status;
    if (status == POET_OK) {
        r->err_stage = r->err_index = r->err_node = r->err_a = r->err_b = 0;
    }
    r->peak_bytes = M.arena.peak;
    r->high_water_bytes = M.arena.high_water;
    r->live_end_bytes = M.arena.live;
    r->compactions = M.arena.compactions;
    r->moved_bytes = M.arena.moved;
    add64(&r->step_ticks_lo, &r->step_ticks_hi, (uint32_t)(ended - started));
    add64(&r->compute_ticks_lo, &r->compute_ticks_hi, M.compute_ticks);
    add64(&r->transfer_ticks_lo, &r->transfer_ticks_hi, M.transfer_ticks);
    add64(&r->compact_ticks_lo, &r->compact_ticks_hi, M.compact_ticks);
}
