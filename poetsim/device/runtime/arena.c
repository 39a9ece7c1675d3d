/* arena.c: the compacting activation arena (see arena.h). */
#include "arena.h"

#include <string.h>

void poet_arena_init(poet_arena *a, uint8_t *base, uint32_t bytes)
{
    memset(a, 0, sizeof(*a));
    a->base = base;
    a->bytes = bytes;
}

/* Slide every live block down to close the gaps, in address order. */
static void compact(poet_arena *a)
{
    uint32_t end = 0;
    for (uint32_t i = 0; i < a->count; ++i) {
        uint32_t id = a->order[i];
        if (a->offset[id] != end) {
            memmove(a->base + end, a->base + a->offset[id], a->size[id]);
            a->moved += a->size[id];
            a->offset[id] = end;
        }
        end += a->size[id];
    }
    a->top = end;
    a->compactions++;
}

int poet_arena_alloc(poet_arena *a, uint32_t id, uint32_t size)
{
    if (id >= POET_ARENA_BLOCKS || a->held[id]) {
        return POET_E_RESIDENT;
    }
    if (size > a->bytes - a->live) {
        return POET_E_ARENA_FULL;
    }
    if (size > a->bytes - a->top) {
        compact(a);
    }
    a->offset[id] = a->top;
    a->size[id] = size;
    a->held[id] = 1;
    a->order[a->count++] = (uint16_t)id;
    a->top += size;
    a->live += size;
    if (a->live > a->peak) {
        a->peak = a->live;
    }
    if (a->top > a->high_water) {
        a->high_water = a->top;
    }
    return POET_OK;
}

void poet_arena_free(poet_arena *a, uint32_t id)
{
    if (id >= POET_ARENA_BLOCKS || !a->held[id]) {
        return;
    }
    uint32_t i = 0;
    while (i < a->count && a->order[i] != id) {
        ++i;
    }
    for (; i + 1u < a->count; ++i) {
        a->order[i] = a->order[i + 1u];
    }
    a->count--;
    a->held[id] = 0;
    a->live -= a->size[id];
    /* The top falls back to the end of the highest block left. */
    if (a->count == 0) {
        a->top = 0;
    } else {
        uint32_t last = a->order[a->count - 1u];
        a->top = a->offset[last] + a->size[last];
    }
}

void poet_arena_rename(poet_arena *a, uint32_t from, uint32_t to)
{
    if (from >= POET_ARENA_BLOCKS || to >= POET_ARENA_BLOCKS || !a->held[from] || a->held[to]) {
        return;
    }
    for (uint32_t i = 0; i < a->count; ++i) {
        if (a->order[i] == from) {
            a->order[i] = (uint16_t)to;
        }
    }
    a->offset[to] = a->offset[from];
    a->size[to] = a->size[from];
    a->held[to] = 1;
    a->held[from] = 0;
}

uint8_t *poet_arena_at(const poet_arena *a, uint32_t id)
{
    return a->base + a->offset[id];
}
