/* poet.h: the interface of the poetsim device runtime, shared by every C file and mirrored by
 * poetsim/device/formats.py on the host.
 *
 * The runtime trains one step of a model on a microcontroller exactly as a poetsim schedule
 * says. Everything it reads arrives in one image in external memory (the board's PSRAM, loaded
 * by the emulator before reset); activations live in one static arena whose size is the RAM
 * budget; weights, their gradients, the input batch and paged-out activations stay outside it.
 * All multi-byte fields are little-endian uint32 words. C99, no heap.
 */
#ifndef POET_H
#define POET_H

#include <stdint.h>

/* Limits of this build: the node tables are static arrays of POET_MAX_NODES entries. */
#define POET_MAX_NODES 128u
#define POET_MAX_OPERANDS 8u
#define POET_MAX_DIMS 11u
#define POET_MAX_LOSS_ROWS 64u
/* No tensor is larger than this (so every index fits a uint32 with room to spare). */
#define POET_MAX_TENSOR_BYTES 0x40000000u

/* ---- the image: what the host loads at the start of external memory ---------------------- */
#define POET_IMAGE_MAGIC 0x474D4950u /* "PIMG" */
#define POET_IMAGE_VERSION 1u

/* Regions of external memory, each [offset, offset + bytes) from its start. */
enum {
    POET_REGION_PROGRAM,
    POET_REGION_SCHEDULE,
    POET_REGION_WEIGHTS,
    POET_REGION_BATCH,
    POET_REGION_GRADS,   /* written by the runtime: the weight gradients, laid out as the weights */
    POET_REGION_STORAGE, /* written by the runtime: the emulated flash that activations page to */
    POET_REGION_COUNT
};

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t image_bytes; /* bytes the host loaded: the header and the first four regions */
    uint32_t region[POET_REGION_COUNT][2]; /* offset, bytes */
} poet_image_header;

/* ---- the program: the graph's operations, one fixed record per node ---------------------- */
#define POET_PROGRAM_MAGIC 0x47525050u /* "PPRG" */
#define POET_PROGRAM_VERSION 2u

enum poet_kind {
    POET_INPUT = 1,
    POET_LINEAR,
    POET_CONV,
    POET_RELU,
    POET_ADD,
    POET_MAXPOOL,
    POET_LOSS,
    POET_LINEAR_GRAD,
    POET_CONV_GRAD,
    POET_RELU_GRAD,
    POET_ADD_GRAD,
    POET_MAXPOOL_GRAD,
    POET_LOSS_GRAD,
    POET_AVGPOOL, /* global average pooling: (planes, positions) -> planes */
    POET_AVGPOOL_GRAD,
    POET_BATCHNORM, /* training mode: the batch's statistics per channel, then scale and shift */
    POET_BATCHNORM_GRAD,
    POET_RELU6,
    POET_RELU6_GRAD,
    POET_KIND_END
};

#define POET_NO_PARAMS 0xFFFFFFFFu
#define POET_FLAG_BIAS 1u

typedef struct {
    uint32_t kind;
    uint32_t output_bytes;
    uint32_t n_grads;  /* upstream gradient operands first (backward kinds) */
    uint32_t n_inputs; /* then the forward tensors the operation reads, in role order */
    uint32_t operands[POET_MAX_OPERANDS];
    uint32_t dims[POET_MAX_DIMS];
    uint32_t param_offset; /* first float of the layer's weights (and of their gradients) */
    uint32_t flags;
} poet_node;

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t num_nodes;
    uint32_t node_words; /* sizeof(poet_node) / 4, so that a host with another layout is refused */
} poet_program_header;

/* ---- error codes: every way a run can fail, none of them a crash ------------------------- */
enum poet_status {
    POET_OK = 0,
    /* the image and the program */
    POET_E_IMAGE = 1,     /* bad magic, version, or a region outside external memory or overlapping */
    POET_E_PROGRAM = 2,   /* a malformed node record: detail a = node, b = which check */
    POET_E_TOO_MANY = 3,  /* more nodes than POET_MAX_NODES */
    /* the schedule's format (poetsim/schedule/formats.py) */
    POET_E_MAGIC = 10,
    POET_E_VERSION = 11,
    POET_E_TIMING = 12,
    POET_E_TRUNCATED = 13,
    POET_E_VARINT = 14,       /* a number longer than 10 bytes or above 64 bits */
    POET_E_NODE_COUNT = 15,   /* num_nodes differs from the program's: a schedule for another graph */
    POET_E_STAGE_COUNT = 16,  /* not one stage per node */
    POET_E_NODE_RANGE = 17,   /* an instruction names a node outside the graph */
    POET_E_AFTER = 18,        /* a stage puts its implicit compute past its instructions */
    POET_E_TRAILING = 19,     /* bytes after the last stage */
    /* the schedule's meaning (poetsim/schedule/model.py), checked as it runs */
    POET_E_ORDER = 30,        /* page-outs, page-ins, then computes and frees */
    POET_E_NOT_RESIDENT = 31, /* a free or page-out of a node not in RAM */
    POET_E_INPUT_MISSING = 32,
    POET_E_COMPUTE_ORDER = 33, /* computed before its stage, or not in ascending order */
    POET_E_RESIDENT = 34,      /* computed or paged in while already in RAM */
    POET_E_NOT_STORED = 35,    /* paged in without an earlier page-out */
    POET_E_TWICE = 36,         /* paged out or in twice in one stage */
    POET_E_LAST_COMPUTE = 37,  /* a stage that does not end with Compute(t) */
    POET_E_ARENA_FULL = 40,    /* an allocation the arena cannot hold: a = bytes asked, b = live bytes */
    POET_E_LABEL = 41,         /* a class label outside the logits */
    POET_E_INDEX = 42,         /* a pooling index outside its plane */
    POET_E_FAULT = 50          /* the core took a fault: a = the exception number */
};

/* ---- the result: what the runtime writes back (result.bin) ------------------------------- */
#define POET_RESULT_MAGIC 0x53455250u /* "PRES" */
#define POET_RESULT_VERSION 1u

typedef struct {
    uint32_t first_ticks;     /* timer ticks of the node's first compute (its kernel only) */
    uint32_t recompute_ticks; /* of every further compute, summed */
    uint32_t recomputes;
    uint32_t page_out_ticks;
    uint32_t page_in_ticks;
} poet_node_stats;

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t status;
    uint32_t err_stage;
    uint32_t err_index; /* position of the instruction within its stage */
    uint32_t err_node;
    uint32_t err_a;
    uint32_t err_b;
    uint32_t arena_bytes;
    uint32_t peak_bytes;       /* largest sum of live allocations */
    uint32_t high_water_bytes; /* largest end of an allocation, from the arena's start */
    uint32_t live_end_bytes;
    uint32_t compactions;
    uint32_t moved_bytes; /* bytes moved by compaction */
    uint32_t page_out_bytes;
    uint32_t page_outs;
    uint32_t page_in_bytes;
    uint32_t page_ins;
    uint32_t computes;
    uint32_t recomputations;
    uint32_t schedule_bytes;
    uint32_t num_nodes;
    uint32_t timing;
    uint32_t stack_bytes; /* deepest stack use, measured by painting */
    uint32_t static_bytes; /* the runtime's own .data + .bss, the arena excluded */
    uint32_t step_ticks_lo, step_ticks_hi;
    uint32_t compute_ticks_lo, compute_ticks_hi;
    uint32_t transfer_ticks_lo, transfer_ticks_hi;
    uint32_t compact_ticks_lo, compact_ticks_hi;
    uint32_t loss_rows;
    uint32_t loss_bits[POET_MAX_LOSS_ROWS]; /* the loss node's output, float bits */
    poet_node_stats nodes[POET_MAX_NODES];
} poet_result;

/* ---- what a board provides ------------------------------------------------------------------ */
/* A free-running timer that counts up; differences are taken modulo 2^32. */
uint32_t poet_clock(void);

/* Run one training step: validate the image in external memory [ext, ext + ext_bytes), decode the
 * schedule once to check its format, then execute it on `arena` (exactly `arena_bytes`). */
void poet_run(uint8_t *ext, uint32_t ext_bytes, uint8_t *arena, uint32_t arena_bytes, poet_result *result);

#endif
