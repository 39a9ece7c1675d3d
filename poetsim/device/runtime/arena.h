/* arena.h: the activation arena, one static block of exactly the RAM budget.
 *
 * Each node's output is one allocation. Allocations go at the top; when the top has no room but
 * the free bytes suffice, the live blocks are slid down in address order (compaction by memmove,
 * the bytes moved counted), so an allocation fails only when live bytes plus the request exceed
 * the arena: exactly the budget the checker holds a schedule to. That failure is the arena's own
 * hard error (POET_E_ARENA_FULL), not a counter.
 */
#ifndef POET_ARENA_H
#define POET_ARENA_H

#include <stdint.h>

#include "poet.h"

/* Block ids: a node's output is block `node`. Under overlap timing an output freed while it is
 * being paged out keeps its bytes to the end of the stage, as block `node + d * POET_MAX_NODES`
 * for its d-th such free in the stage (d = 1 or 2: a node is computed at most once more in a
 * stage, so it can be freed twice), and the node may be computed again meanwhile. */
#define POET_DEFERRED_MAX 2u
#define POET_ARENA_BLOCKS ((1u + POET_DEFERRED_MAX) * POET_MAX_NODES)

typedef struct {
    uint8_t *base;
    uint32_t bytes;
    uint32_t top;       /* end of the highest live block */
    uint32_t live;      /* bytes of live blocks */
    uint32_t peak;      /* largest `live` seen */
    uint32_t high_water; /* largest `top` seen */
    uint32_t compactions;
    uint32_t moved;
    uint32_t count;                  /* live blocks, in address order in `order` */
    uint16_t order[POET_ARENA_BLOCKS]; /* block ids by ascending offset */
    uint32_t offset[POET_ARENA_BLOCKS];
    uint32_t size[POET_ARENA_BLOCKS];
    uint8_t held[POET_ARENA_BLOCKS];
} poet_arena;

/* An empty arena over [base, base + bytes). */
void poet_arena_init(poet_arena *a, uint8_t *base, uint32_t bytes);
/* Allocate `size` bytes as block `id` (not held): POET_OK or POET_E_ARENA_FULL. */
int poet_arena_alloc(poet_arena *a, uint32_t id, uint32_t size);
/* Release block `id` (held). */
void poet_arena_free(poet_arena *a, uint32_t id);
/* Give held block `from` the id `to` (not held), its bytes where they are. */
void poet_arena_rename(poet_arena *a, uint32_t from, uint32_t to);
/* The start of block `id` (held); valid until the next allocation. */
uint8_t *poet_arena_at(const poet_arena *a, uint32_t id);

#endif
