/* The device runtime's decoder, program checks and engine on the host, under AddressSanitizer and
 * UndefinedBehaviorSanitizer (tests/test_device_decoder.py builds and drives it).
 *
 * usage: test_device_host BASE_IMAGE SCHEDULE...
 * BASE_IMAGE is an image whose schedule region has room for the longest SCHEDULE. For each
 * schedule file, the runtime runs one step on it: the file's bytes are put in the schedule
 * region, the region's size set to the file's, and the bytes after it poisoned, so that reading
 * one byte past the schedule stops the process. One line per file: its name, the runtime's
 * status, stage and node. Any sanitizer finding aborts with a non-zero exit.
 */
#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet.h"

static uint32_t ticks;

uint32_t poet_clock(void)
{
    return ticks++;
}

static uint8_t *read_file(const char *path, long *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(*size > 0 ? (size_t)*size : 1u);
    if (data && fread(data, 1, (size_t)*size, f) != (size_t)*size) {
        free(data);
        data = NULL;
    }
    fclose(f);
    return data;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s BASE_IMAGE SCHEDULE...\n", argv[0]);
        return 2;
    }
    long base_size;
    uint8_t *base = read_file(argv[1], &base_size);
    if (!base || base_size < (long)sizeof(poet_image_header)) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    poet_image_header header;
    memcpy(&header, base, sizeof(header));
    uint32_t at = header.region[POET_REGION_SCHEDULE][0], room = header.region[POET_REGION_SCHEDULE][1];
    /* External memory just large enough for every region, so that none reaches past it. */
    uint32_t ext_bytes = 0;
    for (uint32_t r = 0; r < POET_REGION_COUNT; ++r) {
        uint32_t end = header.region[r][0] + header.region[r][1];
        ext_bytes = end > ext_bytes ? end : ext_bytes;
    }
    if ((long)ext_bytes < base_size) {
        ext_bytes = (uint32_t)base_size;
    }
    uint8_t *ext = malloc(ext_bytes); /* malloc aligns for any type, as the image needs */
    static poet_result result;
    for (int i = 2; i < argc; ++i) {
        long size;
        uint8_t *schedule = read_file(argv[i], &size);
        if (!schedule || (uint32_t)size > room) {
            fprintf(stderr, "cannot read %s, or longer than the %u bytes of room\n", argv[i], room);
            return 2;
        }
        ASAN_UNPOISON_MEMORY_REGION(ext, ext_bytes);
        memset(ext, 0xA5, ext_bytes);
        memcpy(ext, base, (size_t)base_size);
        memcpy(ext + at, schedule, (size_t)size);
        ((poet_image_header *)(void *)ext)->region[POET_REGION_SCHEDULE][1] = (uint32_t)size;
        ASAN_POISON_MEMORY_REGION(ext + at + size, room - (uint32_t)size);
        /* The arena is exactly as large as asked, on the heap, so that one byte past it is caught too. */
        uint32_t arena_bytes = (uint32_t)strtoul(getenv("POET_ARENA_BYTES") ? getenv("POET_ARENA_BYTES") : "65536", NULL, 10);
        uint8_t *arena = malloc(arena_bytes ? arena_bytes : 1u);
        poet_run(ext, ext_bytes, arena, arena_bytes, &result);
        printf("%s %u %u %u\n", argv[i], result.status, result.err_stage, result.err_node);
        free(arena);
        free(schedule);
    }
    ASAN_UNPOISON_MEMORY_REGION(ext, ext_bytes);
    free(ext);
    free(base);
    return 0;
}
