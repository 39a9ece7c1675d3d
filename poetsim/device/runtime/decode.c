/* decode.c: the binary schedule decoder (see decode.h and poetsim/schedule/formats.py). */
#include "decode.h"

#include "poet.h"

#define MAX_VARINT_BYTES 10u
#define LISTED_MARK 7u /* a stage header's `after` meaning "Compute(t) is listed" */

static const uint8_t MAGIC[4] = {'P', 'O', 'E', 'T'};

static int read_byte(poet_decoder *d, uint8_t *out)
{
    if (d->at >= d->len) {
        return POET_E_TRUNCATED;
    }
    *out = d->buf[d->at++];
    return POET_OK;
}

/* An unsigned LEB128 number of at most 10 bytes whose value fits 64 bits. */
static int read_varint(poet_decoder *d, uint64_t *out)
{
    uint64_t value = 0;
    for (uint32_t i = 0; i < MAX_VARINT_BYTES; ++i) {
        uint8_t byte;
        int status = read_byte(d, &byte);
        if (status != POET_OK) {
            return status;
        }
        uint64_t group = (uint64_t)(byte & 0x7Fu);
        uint32_t shift = 7u * i;
        if (shift == 63u && group > 1u) {
            return POET_E_VARINT; /* bits above the 64th */
        }
        value |= group << shift;
        if (byte < 0x80u) {
            *out = value;
            return POET_OK;
        }
    }
    return POET_E_VARINT;
}

int poet_decode_begin(poet_decoder *d, const uint8_t *buf, uint32_t len, uint32_t expected_nodes)
{
    d->buf = buf;
    d->len = len;
    d->at = 0;
    d->timing = 0;
    d->num_nodes = 0;
    d->num_stages = 0;
    d->stage = 0;
    d->listed = d->read = d->position = 0;
    d->implicit_at = UINT64_MAX;
    for (uint32_t i = 0; i < 4u; ++i) {
        uint8_t byte;
        if (read_byte(d, &byte) != POET_OK) {
            return POET_E_TRUNCATED;
        }
        if (byte != MAGIC[i]) {
            return POET_E_MAGIC;
        }
    }
    uint8_t version, timing;
    if (read_byte(d, &version) != POET_OK || read_byte(d, &timing) != POET_OK) {
        return POET_E_TRUNCATED;
    }
    if (version != 1u) {
        return POET_E_VERSION;
    }
    if (timing > 1u) {
        return POET_E_TIMING;
    }
    d->timing = timing;
    uint64_t nodes, stages;
    int status = read_varint(d, &nodes);
    if (status == POET_OK) {
        status = read_varint(d, &stages);
    }
    if (status != POET_OK) {
        return status;
    }
    if (nodes != expected_nodes) {
        return POET_E_NODE_COUNT;
    }
    if (stages != nodes) {
        return POET_E_STAGE_COUNT;
    }
    d->num_nodes = (uint32_t)nodes;
    d->num_stages = (uint32_t)stages;
    d->stage = UINT32_MAX; /* no stage read yet */
    return POET_OK;
}

int poet_decode_stage(poet_decoder *d, uint64_t *count)
{
    uint64_t header;
    int status = read_varint(d, &header);
    if (status != POET_OK) {
        return status;
    }
    d->stage = d->stage == UINT32_MAX ? 0u : d->stage + 1u;
    d->listed = header >> 3;
    d->read = 0;
    d->position = 0;
    uint64_t after = header & 7u;
    if (after == LISTED_MARK) {
        d->implicit_at = UINT64_MAX;
        *count = d->listed;
    } else {
        if (after > d->listed) {
            return POET_E_AFTER;
        }
        d->implicit_at = d->listed - after;
        *count = d->listed + 1u;
    }
    return POET_OK;
}

int poet_decode_next(poet_decoder *d, poet_instruction *out)
{
    uint64_t position = d->position++;
    if (position == d->implicit_at) {
        out->op = POET_OP_COMPUTE;
        out->node = d->stage;
        return POET_OK;
    }
    if (d->read >= d->listed) {
        return POET_E_TRUNCATED; /* asked for more than the stage holds: a caller's slip, refused */
    }
    uint64_t code;
    int status = read_varint(d, &code);
    if (status != POET_OK) {
        return status;
    }
    d->read++;
    uint64_t node = code >> 2;
    if (node >= d->num_nodes) {
        return POET_E_NODE_RANGE;
    }
    out->op = (uint32_t)(code & 3u);
    out->node = (uint32_t)node;
    return POET_OK;
}

int poet_decode_end(const poet_decoder *d)
{
    return d->at == d->len ? POET_OK : POET_E_TRAILING;
}

int poet_decode_check(const uint8_t *buf, uint32_t len, uint32_t expected_nodes, uint32_t *timing, uint32_t *at)
{
    poet_decoder d;
    int status = poet_decode_begin(&d, buf, len, expected_nodes);
    for (uint32_t t = 0; status == POET_OK && t < d.num_stages; ++t) {
        uint64_t count;
        status = poet_decode_stage(&d, &count);
        for (uint64_t i = 0; status == POET_OK && i < count; ++i) {
            poet_instruction ins;
            status = poet_decode_next(&d, &ins);
        }
    }
    if (status == POET_OK) {
        status = poet_decode_end(&d);
    }
    *timing = d.timing;
    *at = d.at;
    return status;
}
