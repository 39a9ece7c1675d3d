/* decode.h: a streaming decoder of poetsim's binary schedule (poetsim/schedule/formats.py).
 *
 * The schedule stays where it was loaded; the decoder walks it with a cursor and never reads a
 * byte outside [buf, buf + len). Every malformed input is a status code (poet.h), never a read
 * out of bounds: a truncated file, an overlong number, a node outside the graph, a misplaced
 * implicit compute, trailing bytes. (The two opcode bits name four instructions, all valid, so
 * version 1 has no unknown opcode.)
 */
#ifndef POET_DECODE_H
#define POET_DECODE_H

#include <stdint.h>

enum poet_op { POET_OP_COMPUTE = 0, POET_OP_PAGE_OUT = 1, POET_OP_PAGE_IN = 2, POET_OP_FREE = 3 };

typedef struct {
    uint32_t op;
    uint32_t node;
} poet_instruction;

typedef struct {
    const uint8_t *buf;
    uint32_t len;
    uint32_t at;
    uint32_t timing; /* 0 compute-only, 1 overlap */
    uint32_t num_nodes;
    uint32_t num_stages;
    uint32_t stage;      /* the stage being read */
    uint64_t listed;     /* instructions listed in the stage's bytes */
    uint64_t read;       /* listed instructions read so far */
    uint64_t position;   /* instructions handed out so far in the stage */
    uint64_t implicit_at; /* where Compute(stage) goes, or UINT64_MAX when it is listed */
} poet_decoder;

/* Read the header; `expected_nodes` is the program's node count (a schedule for another graph
 * is refused here). */
int poet_decode_begin(poet_decoder *d, const uint8_t *buf, uint32_t len, uint32_t expected_nodes);
/* Read the next stage's header; *count is how many instructions it holds. */
int poet_decode_stage(poet_decoder *d, uint64_t *count);
/* The next instruction of the current stage (call it *count times). */
int poet_decode_next(poet_decoder *d, poet_instruction *out);
/* After the last stage: nothing may follow. */
int poet_decode_end(const poet_decoder *d);
/* Decode the whole schedule without running it: the first format error, or POET_OK; *at is the
 * byte offset reached. */
int poet_decode_check(const uint8_t *buf, uint32_t len, uint32_t expected_nodes, uint32_t *timing, uint32_t *at);

#endif
