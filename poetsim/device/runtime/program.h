/* program.h: checks of the image and the program before anything runs.
 *
 * Everything the kernels later index is proven in bounds here, once: every region lies inside
 * external memory, every node's output size matches its shape, every operand is an earlier node
 * whose output holds what the operation reads, and every layer's weights lie inside the weights.
 */
#ifndef POET_PROGRAM_H
#define POET_PROGRAM_H

#include <stdint.h>

#include "poet.h"

/* Which check a malformed node failed (the result's err_b for POET_E_PROGRAM). */
enum poet_program_check {
    POET_CHECK_KIND = 1,      /* an unknown operation */
    POET_CHECK_OPERANDS = 2,  /* the wrong number of operands for the operation */
    POET_CHECK_ORDER = 3,     /* an operand that is not an earlier node */
    POET_CHECK_OUTPUT = 4,    /* an output size that does not match the shape */
    POET_CHECK_OPERAND = 5,   /* an operand whose output is smaller than what is read */
    POET_CHECK_PARAMS = 6,    /* weights outside the weights region */
    POET_CHECK_SHAPE = 7,     /* dimensions that do not fit together */
    POET_CHECK_SIZE = 8,      /* a tensor above POET_MAX_TENSOR_BYTES */
    POET_CHECK_BATCH = 9,     /* the batch region differs from the input node's output */
    POET_CHECK_ROLE = 10,     /* an operand of the wrong operation (pooling indices, labels) */
    POET_CHECK_HEADER = 11    /* the program's own header */
};

typedef struct {
    const poet_node *nodes;
    uint32_t num_nodes;
    const float *weights;
    uint32_t weight_floats;
    float *grads;
    const uint8_t *batch;
    uint32_t batch_bytes;
    const uint8_t *schedule;
    uint32_t schedule_bytes;
    uint8_t *storage;
    uint32_t storage_bytes;
} poet_program;

/* Validate the image at `ext` and fill `program`; on failure *node and *check say where. */
int poet_program_load(uint8_t *ext, uint32_t ext_bytes, poet_program *program, uint32_t *node, uint32_t *check);

#endif
