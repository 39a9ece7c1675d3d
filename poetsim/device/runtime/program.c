/* program.c: validation of the image and of every node record (see program.h). */
#include "program.h"

#include <stddef.h>

#include "kernels.h"

typedef struct {
    uint8_t known;
    uint8_t backward; /* takes upstream gradients */
    uint8_t inputs;   /* forward operands */
    uint8_t params;   /* has weights */
} kind_info;

static const kind_info KINDS[POET_KIND_END] = {
    [POET_INPUT] = {1, 0, 0, 0},        [POET_LINEAR] = {1, 0, 1, 1},      [POET_CONV] = {1, 0, 1, 1},
    [POET_RELU] = {1, 0, 1, 0},         [POET_ADD] = {1, 0, 2, 0},         [POET_MAXPOOL] = {1, 0, 1, 0},
    [POET_LOSS] = {1, 0, 2, 0},         [POET_LINEAR_GRAD] = {1, 1, 1, 1}, [POET_CONV_GRAD] = {1, 1, 1, 1},
    [POET_RELU_GRAD] = {1, 1, 1, 0},    [POET_ADD_GRAD] = {1, 1, 0, 0},    [POET_MAXPOOL_GRAD] = {1, 1, 2, 0},
    [POET_LOSS_GRAD] = {1, 0, 2, 0},    [POET_AVGPOOL] = {1, 0, 1, 0},     [POET_AVGPOOL_GRAD] = {1, 1, 0, 0},
    [POET_BATCHNORM] = {1, 0, 1, 1},    [POET_BATCHNORM_GRAD] = {1, 1, 1, 1}, [POET_RELU6] = {1, 0, 1, 0},
    [POET_RELU6_GRAD] = {1, 1, 1, 0},
};

/* Products of sizes saturate here, far above any tensor, so that none can wrap around. */
#define SATURATED ((uint64_t)1 << 40)

static uint64_t mul(uint64_t a, uint64_t b)
{
    if (a >= SATURATED || b >= SATURATED || (a != 0u && b > SATURATED / a)) {
        return SATURATED;
    }
    return a * b;
}

static uint64_t mul4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return mul(mul(a, b), mul(c, d));
}

/* Bytes of `count` floats, or UINT64_MAX past the largest tensor. */
static uint64_t floats(uint64_t count)
{
    return count > POET_MAX_TENSOR_BYTES / 4u ? UINT64_MAX : 4u * count;
}

static int region_ok(const poet_image_header *h, uint32_t ext_bytes, uint32_t r)
{
    uint64_t offset = h->region[r][0], bytes = h->region[r][1];
    if (offset % 4u != 0u || offset < sizeof(poet_image_header) || offset + bytes > ext_bytes) {
        return 0;
    }
    for (uint32_t other = 0; other < r; ++other) {
        uint64_t o = h->region[other][0], b = h->region[other][1];
        if (offset < o + b && o < offset + bytes) {
            return 0;
        }
    }
    /* The regions the host loads come first, within image_bytes; the runtime's own after. */
    if (r < POET_REGION_GRADS ? offset + bytes > h->image_bytes : offset < h->image_bytes) {
        return 0;
    }
    return 1;
}

typedef struct {
    const poet_program *p;
    uint32_t at;
    const poet_node *nd;
} checker;

/* The output bytes of operand `i` of the node being checked. */
static uint64_t operand_bytes(const checker *c, uint32_t i)
{
    return c->p->nodes[c->nd->operands[i]].output_bytes;
}

/* Each upstream gradient holds exactly `bytes`; each forward operand at least its `need`. */
static int check_operands(const checker *c, uint64_t grad_bytes, const uint64_t *need)
{
    const poet_node *nd = c->nd;
    for (uint32_t i = 0; i < nd->n_grads; ++i) {
        if (operand_bytes(c, i) != grad_bytes) {
            return POET_CHECK_OPERAND;
        }
    }
    for (uint32_t i = 0; i < nd->n_inputs; ++i) {
        if (need[i] == UINT64_MAX || operand_bytes(c, nd->n_grads + i) < need[i]) {
            return POET_CHECK_OPERAND;
        }
    }
    return 0;
}

static int params_ok(const checker *c, uint64_t count)
{
    uint64_t first = c->nd->param_offset;
    return first != POET_NO_PARAMS && count != 0u && first + count <= c->p->weight_floats;
}

static uint32_t window_out(uint32_t size, uint32_t k, uint32_t stride, uint32_t pad)
{
    uint64_t padded = (uint64_t)size + 2u * (uint64_t)pad;
    return padded < k ? 0u : (uint32_t)((padded - k) / stride + 1u);
}

/* A window's shape: positive sizes, a stride, output sizes that follow, padding within half the
 * kernel (so no window lies wholly in the padding). */
static int window_ok(uint32_t h, uint32_t w, uint32_t oh, uint32_t ow, uint32_t k, uint32_t stride, uint32_t pad)
{
    return h > 0u && w > 0u && k > 0u && stride > 0u && pad <= k / 2u && k <= POET_MAX_KERNEL && stride <= 16u &&
           oh == window_out(h, k, stride, pad) && ow == window_out(w, k, stride, pad) && oh > 0u && ow > 0u;
}

static int check_node(const checker *c)
{
    const poet_node *nd = c->nd;
    const uint32_t *d = nd->dims;
    uint32_t kind = nd->kind;
    uint64_t out = UINT64_MAX, grad = 0;
    uint64_t need[POET_MAX_OPERANDS] = {0};
    int bias = (nd->flags & POET_FLAG_BIAS) != 0u;
    switch (kind) {
    case POET_INPUT:
        if (d[0] % 4u != 0u || d[0] > POET_MAX_TENSOR_BYTES || d[1] == 0u || d[1] > POET_MAX_TENSOR_BYTES / 4u) {
            return POET_CHECK_SHAPE;
        }
        out = (uint64_t)d[0] + 4u * (uint64_t)d[1];
        if (out != c->p->batch_bytes) {
            return POET_CHECK_BATCH;
        }
        break;
    case POET_LINEAR:
    case POET_LINEAR_GRAD: {
        uint64_t m = d[0], k = d[1], n = d[2];
        if (m == 0u || k == 0u || n == 0u) {
            return POET_CHECK_SHAPE;
        }
        uint64_t y = floats(mul(m, n));
        need[0] = floats(mul(m, k));
        if (y == UINT64_MAX || need[0] == UINT64_MAX || !params_ok(c, mul(n, k) + (bias ? n : 0u))) {
            return y == UINT64_MAX || need[0] == UINT64_MAX ? POET_CHECK_SIZE : POET_CHECK_PARAMS;
        }
        out = kind == POET_LINEAR ? y : (nd->output_bytes == 0u ? 0u : need[0]);
        grad = y;
        break;
    }
    case POET_CONV:
    case POET_CONV_GRAD: {
        uint64_t n = d[0], ch = d[1], o = d[4], k = d[7], groups = d[10];
        if (n == 0u || ch == 0u || o == 0u || groups == 0u || ch % groups != 0u || o % groups != 0u ||
            !window_ok(d[2], d[3], d[5], d[6], d[7], d[8], d[9])) {
            return POET_CHECK_SHAPE;
        }
        uint64_t y = floats(mul4(n, o, d[5], d[6]));
        need[0] = floats(mul4(n, ch, d[2], d[3]));
        if (y == UINT64_MAX || need[0] == UINT64_MAX) {
            return POET_CHECK_SIZE;
        }
        if (!params_ok(c, mul4(o, ch / groups, k, k) + (bias ? o : 0u))) {
            return POET_CHECK_PARAMS;
        }
        out = kind == POET_CONV ? y : (nd->output_bytes == 0u ? 0u : need[0]);
        grad = y;
        break;
    }
    case POET_RELU:
    case POET_RELU_GRAD:
    case POET_RELU6:
    case POET_RELU6_GRAD:
    case POET_ADD:
    case POET_ADD_GRAD:
        if (d[0] == 0u || floats(d[0]) == UINT64_MAX) {
            return POET_CHECK_SHAPE;
        }
        out = grad = need[0] = need[1] = floats(d[0]);
        break;
    case POET_MAXPOOL:
    case POET_MAXPOOL_GRAD: {
        uint64_t planes = d[0];
        if (planes == 0u || !window_ok(d[1], d[2], d[3], d[4], d[5], d[6], d[7])) {
            return POET_CHECK_SHAPE;
        }
        uint64_t pooled = mul4(planes, d[3], d[4], 1u);
        need[0] = floats(mul4(planes, d[1], d[2], 1u));
        grad = floats(pooled);
        need[1] = floats(mul(3u, pooled)); /* the values and their int64 indices */
        if (need[0] == UINT64_MAX || need[1] == UINT64_MAX) {
            return POET_CHECK_SIZE;
        }
        out = kind == POET_MAXPOOL ? need[1] : need[0]; /* a pooling's gradient is only its input's */
        break;
    }
    case POET_BATCHNORM:
    case POET_BATCHNORM_GRAD: {
        uint64_t n = d[0], ch = d[1], positions = d[2];
        if (n == 0u || ch == 0u || positions == 0u) {
            return POET_CHECK_SHAPE;
        }
        uint64_t y = floats(mul4(n, ch, positions, 1u));
        if (y == UINT64_MAX) {
            return POET_CHECK_SIZE;
        }
        if (!params_ok(c, 2u * ch)) { /* the scale, then the shift */
            return POET_CHECK_PARAMS;
        }
        need[0] = grad = y;
        out = kind == POET_BATCHNORM ? y : (nd->output_bytes == 0u ? 0u : y);
        break;
    }
    case POET_AVGPOOL:
    case POET_AVGPOOL_GRAD: {
        uint64_t planes = floats(d[0]);
        need[0] = floats(mul(d[0], d[1]));
        if (d[0] == 0u || d[1] == 0u) {
            return POET_CHECK_SHAPE;
        }
        if (planes == UINT64_MAX || need[0] == UINT64_MAX) {
            return POET_CHECK_SIZE;
        }
        out = kind == POET_AVGPOOL ? planes : need[0];
        grad = planes;
        break;
    }
    case POET_LOSS:
    case POET_LOSS_GRAD: {
        uint64_t rows = d[0], classes = d[1], labels_at = d[2];
        if (rows == 0u || classes == 0u || labels_at % 4u != 0u) {
            return POET_CHECK_SHAPE;
        }
        need[0] = floats(mul(rows, classes));
        need[1] = labels_at + floats(rows);
        if (need[0] == UINT64_MAX || floats(rows) == UINT64_MAX || labels_at > POET_MAX_TENSOR_BYTES) {
            return POET_CHECK_SIZE;
        }
        out = kind == POET_LOSS ? floats(rows) : need[0];
        break;
    }
    default:
        return POET_CHECK_KIND;
    }
    if (nd->output_bytes != out) {
        return POET_CHECK_OUTPUT;
    }
    return check_operands(c, grad, need);
}

/* Operands that must come from a particular operation: pooling indices from the pooling node of
 * the same shape, labels from the input node. */
static int check_roles(const checker *c)
{
    const poet_node *nd = c->nd;
    const poet_node *nodes = c->p->nodes;
    if (nd->kind == POET_MAXPOOL_GRAD) {
        const poet_node *pool = &nodes[nd->operands[nd->n_grads + 1u]];
        for (uint32_t i = 0; i < 8u; ++i) {
            if (pool->kind != POET_MAXPOOL || pool->dims[i] != nd->dims[i]) {
                return POET_CHECK_ROLE;
            }
        }
    }
    if (nd->kind == POET_LOSS || nd->kind == POET_LOSS_GRAD) {
        const poet_node *input = &nodes[nd->operands[nd->n_grads + 1u]];
        if (input->kind != POET_INPUT || input->dims[0] != nd->dims[2] || input->dims[1] != nd->dims[0]) {
            return POET_CHECK_ROLE;
        }
    }
    return 0;
}

int poet_program_load(uint8_t *ext, uint32_t ext_bytes, poet_program *p, uint32_t *node, uint32_t *check)
{
    *node = 0;
    *check = 0;
    if (ext_bytes < sizeof(poet_image_header)) {
        return POET_E_IMAGE;
    }
    const poet_image_header *h = (const poet_image_header *)(void *)ext;
    if (h->magic != POET_IMAGE_MAGIC || h->version != POET_IMAGE_VERSION || h->image_bytes > ext_bytes) {
        return POET_E_IMAGE;
    }
    for (uint32_t r = 0; r < POET_REGION_COUNT; ++r) {
        if (!region_ok(h, ext_bytes, r)) {
            *check = r;
            return POET_E_IMAGE;
        }
    }
    const uint32_t(*reg)[2] = h->region;
    if (reg[POET_REGION_WEIGHTS][1] % 4u != 0u || reg[POET_REGION_GRADS][1] != reg[POET_REGION_WEIGHTS][1]) {
        *check = POET_REGION_GRADS;
        return POET_E_IMAGE;
    }
    p->weights = (const float *)(const void *)(ext + reg[POET_REGION_WEIGHTS][0]);
    p->weight_floats = reg[POET_REGION_WEIGHTS][1] / 4u;
    p->grads = (float *)(void *)(ext + reg[POET_REGION_GRADS][0]);
    p->batch = ext + reg[POET_REGION_BATCH][0];
    p->batch_bytes = reg[POET_REGION_BATCH][1];
    p->schedule = ext + reg[POET_REGION_SCHEDULE][0];
    p->schedule_bytes = reg[POET_REGION_SCHEDULE][1];
    p->storage = ext + reg[POET_REGION_STORAGE][0];
    p->storage_bytes = reg[POET_REGION_STORAGE][1];

    *check = POET_CHECK_HEADER;
    uint32_t program_bytes = reg[POET_REGION_PROGRAM][1];
    if (program_bytes < sizeof(poet_program_header)) {
        return POET_E_PROGRAM;
    }
    const poet_program_header *ph = (const poet_program_header *)(const void *)(ext + reg[POET_REGION_PROGRAM][0]);
    if (ph->magic != POET_PROGRAM_MAGIC || ph->version != POET_PROGRAM_VERSION || ph->node_words * 4u != sizeof(poet_node)) {
        return POET_E_PROGRAM;
    }
    if (ph->num_nodes == 0u || ph->num_nodes > POET_MAX_NODES) {
        *check = 0;
        return POET_E_TOO_MANY;
    }
    if ((uint64_t)ph->num_nodes * sizeof(poet_node) != program_bytes - sizeof(poet_program_header)) {
        return POET_E_PROGRAM;
    }
    p->nodes = (const poet_node *)(const void *)(ph + 1);
    p->num_nodes = ph->num_nodes;
    for (uint32_t i = 0; i < p->num_nodes; ++i) {
        checker c = {p, i, &p->nodes[i]};
        const poet_node *nd = c.nd;
        *node = i;
        if (nd->kind == 0u || nd->kind >= POET_KIND_END || !KINDS[nd->kind].known) {
            *check = POET_CHECK_KIND;
            return POET_E_PROGRAM;
        }
        const kind_info *info = &KINDS[nd->kind];
        if (nd->n_inputs != info->inputs || (info->backward ? nd->n_grads == 0u : nd->n_grads != 0u) ||
            nd->n_grads + nd->n_inputs > POET_MAX_OPERANDS) {
            *check = POET_CHECK_OPERANDS;
            return POET_E_PROGRAM;
        }
        for (uint32_t j = 0; j < nd->n_grads + nd->n_inputs; ++j) {
            if (nd->operands[j] >= i) {
                *check = POET_CHECK_ORDER;
                return POET_E_PROGRAM;
            }
        }
        if (!info->params && nd->param_offset != POET_NO_PARAMS) {
            *check = POET_CHECK_PARAMS;
            return POET_E_PROGRAM;
        }
        int failed = check_node(&c);
        if (failed == 0) {
            failed = check_roles(&c);
        }
        if (failed != 0) {
            *check = (uint32_t)failed;
            return POET_E_PROGRAM;
        }
    }
    *node = 0;
    *check = 0;
    return POET_OK;
}
