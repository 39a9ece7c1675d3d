/* kernels.c: the operations of the device models (see kernels.h). */
#include "kernels.h"

#include <math.h>
#include <string.h>

/* The gradient of a layer's output at element i: its upstream gradients summed in order. */
static inline float grad_at(const float *const *g, uint32_t ng, uint32_t i)
{
    float sum = g[0][i];
    for (uint32_t j = 1; j < ng; ++j) {
        sum += g[j][i];
    }
    return sum;
}

void poet_linear(const float *x, const float *w, const float *b, float *y, uint32_t m, uint32_t k, uint32_t n)
{
    for (uint32_t row = 0; row < m; ++row) {
        const float *xr = x + row * k;
        for (uint32_t col = 0; col < n; ++col) {
            const float *wr = w + col * k;
            float acc = b ? b[col] : 0.0f;
            for (uint32_t i = 0; i < k; ++i) {
                acc += xr[i] * wr[i];
            }
            y[row * n + col] = acc;
        }
    }
}

void poet_linear_grad(const float *const *g, uint32_t ng, const float *x, const float *w, float *dw, float *db, float *dx,
                      uint32_t m, uint32_t k, uint32_t n)
{
    memset(dw, 0, (size_t)n * k * sizeof(float));
    if (db) {
        memset(db, 0, (size_t)n * sizeof(float));
    }
    if (dx) {
        memset(dx, 0, (size_t)m * k * sizeof(float));
    }
    for (uint32_t row = 0; row < m; ++row) {
        const float *xr = x + row * k;
        for (uint32_t col = 0; col < n; ++col) {
            float gv = grad_at(g, ng, row * n + col);
            float *dwr = dw + col * k;
            if (db) {
                db[col] += gv;
            }
            if (dx) {
                const float *wr = w + col * k;
                float *dxr = dx + row * k;
                for (uint32_t i = 0; i < k; ++i) {
                    dwr[i] += gv * xr[i];
                    dxr[i] += gv * wr[i];
                }
            } else {
                for (uint32_t i = 0; i < k; ++i) {
                    dwr[i] += gv * xr[i];
                }
            }
        }
    }
}

/* The outputs [lo, hi) of a sliding window whose tap `tap` falls inside an input of `size`: output
 * o reads input o * stride + tap - pad, so taps in the padding are skipped, not multiplied by zero. */
static void span(uint32_t tap, uint32_t stride, uint32_t pad, uint32_t size, uint32_t outputs, uint32_t *lo, uint32_t *hi)
{
    int32_t first = (int32_t)pad - (int32_t)tap; /* o * stride >= first */
    int32_t last = (int32_t)size - 1 + (int32_t)pad - (int32_t)tap; /* o * stride <= last */
    uint32_t begin = first <= 0 ? 0u : ((uint32_t)first + stride - 1u) / stride;
    uint32_t end = last < 0 ? 0u : (uint32_t)last / stride + 1u;
    if (end > outputs) {
        end = outputs;
    }
    *lo = begin;
    *hi = end > begin ? end : begin;
}

/* Convolutions run weight by weight over whole output rows, so that the work per multiply-add is
 * nearly the same whatever the kernel size, stride or channel count: each output sums its bias,
 * then its taps in (channel, row, column) order, over the input channels of its group. */
/* Each tap's span of output rows and columns, computed once per call (k <= POET_MAX_KERNEL). */
typedef struct {
    uint32_t oy0[POET_MAX_KERNEL], oy1[POET_MAX_KERNEL], ox0[POET_MAX_KERNEL], ox1[POET_MAX_KERNEL];
} spans;

static void conv_spans(const poet_conv_shape *s, spans *sp)
{
    for (uint32_t t = 0; t < s->k; ++t) {
        span(t, s->stride, s->pad, s->h, s->oh, &sp->oy0[t], &sp->oy1[t]);
        span(t, s->stride, s->pad, s->w, s->ow, &sp->ox0[t], &sp->ox1[t]);
    }
}

void poet_conv(const float *x, const float *w, const float *b, float *y, const poet_conv_shape *s)
{
    const uint32_t k = s->k, kk = k * k, plane = s->h * s->w, outputs = s->oh * s->ow;
    const uint32_t cg = s->c / s->groups, og = s->o / s->groups;
    spans sp;
    conv_spans(s, &sp);
    for (uint32_t n = 0; n < s->n; ++n) {
        for (uint32_t o = 0; o < s->o; ++o) {
            float *yo = y + (n * s->o + o) * outputs;
            const float bias = b ? b[o] : 0.0f;
            const uint32_t c0 = o / og * cg; /* the first input channel of o's group */
            for (uint32_t i = 0; i < outputs; ++i) {
                yo[i] = bias;
            }
            for (uint32_t c = 0; c < cg; ++c) {
                const float *xc = x + (n * s->c + c0 + c) * plane;
                const float *wc = w + (o * cg + c) * kk;
                for (uint32_t ky = 0; ky < k; ++ky) {
                    const uint32_t oy0 = sp.oy0[ky], oy1 = sp.oy1[ky];
                    for (uint32_t kx = 0; kx < k; ++kx) {
                        const uint32_t ox0 = sp.ox0[kx], ox1 = sp.ox1[kx];
                        const float wv = wc[ky * k + kx];
                        for (uint32_t oy = oy0; oy < oy1; ++oy) {
                            const float *xrow = xc + (oy * s->stride + ky - s->pad) * s->w;
                            float *yrow = yo + oy * s->ow;
                            uint32_t ix = ox0 * s->stride + kx - s->pad;
                            for (uint32_t ox = ox0; ox < ox1; ++ox, ix += s->stride) {
                                yrow[ox] += wv * xrow[ix];
                            }
                        }
                    }
                }
            }
        }
    }
}

void poet_conv_grad(const float *const *g, uint32_t ng, const float *x, const float *w, float *dw, float *db, float *dx,
                    const poet_conv_shape *s)
{
    const uint32_t k = s->k, kk = k * k, plane = s->h * s->w, outputs = s->oh * s->ow;
    const uint32_t cg = s->c / s->groups, og = s->o / s->groups;
    spans sp;
    conv_spans(s, &sp);
    memset(dw, 0, (size_t)s->o * cg * kk * sizeof(float));
    if (db) {
        memset(db, 0, (size_t)s->o * sizeof(float));
    }
    if (dx) {
        memset(dx, 0, (size_t)s->n * s->c * plane * sizeof(float));
    }
    for (uint32_t n = 0; n < s->n; ++n) {
        for (uint32_t o = 0; o < s->o; ++o) {
            const uint32_t go = (n * s->o + o) * outputs; /* this output plane in every upstream gradient */
            if (db) {
                float sum = db[o];
                for (uint32_t i = 0; i < outputs; ++i) {
                    sum += grad_at(g, ng, go + i);
                }
                db[o] = sum;
            }
            const uint32_t c0 = o / og * cg;
            for (uint32_t c = 0; c < cg; ++c) {
                const float *xc = x + (n * s->c + c0 + c) * plane;
                const float *wc = w + (o * cg + c) * kk;
                float *dwc = dw + (o * cg + c) * kk;
                float *dxc = dx ? dx + (n * s->c + c0 + c) * plane : NULL;
                for (uint32_t ky = 0; ky < k; ++ky) {
                    const uint32_t oy0 = sp.oy0[ky], oy1 = sp.oy1[ky];
                    for (uint32_t kx = 0; kx < k; ++kx) {
                        const uint32_t ox0 = sp.ox0[kx], ox1 = sp.ox1[kx];
                        const float wv = wc[ky * k + kx];
                        float acc = dwc[ky * k + kx];
                        for (uint32_t oy = oy0; oy < oy1; ++oy) {
                            const uint32_t row = (oy * s->stride + ky - s->pad) * s->w;
                            const uint32_t grow = go + oy * s->ow;
                            uint32_t ix = ox0 * s->stride + kx - s->pad;
                            if (dxc) {
                                for (uint32_t ox = ox0; ox < ox1; ++ox, ix += s->stride) {
                                    const float gv = grad_at(g, ng, grow + ox);
                                    acc += gv * xc[row + ix];
                                    dxc[row + ix] += gv * wv;
                                }
                            } else {
                                for (uint32_t ox = ox0; ox < ox1; ++ox, ix += s->stride) {
                                    acc += grad_at(g, ng, grow + ox) * xc[row + ix];
                                }
                            }
                        }
                        dwc[ky * k + kx] = acc;
                    }
                }
            }
        }
    }
}

void poet_relu(const float *x, float *y, uint32_t count)
{
    for (uint32_t i = 0; i < count; ++i) {
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}

void poet_relu_grad(const float *const *g, uint32_t ng, const float *y, float *dx, uint32_t count)
{
    for (uint32_t i = 0; i < count; ++i) {
        dx[i] = y[i] > 0.0f ? grad_at(g, ng, i) : 0.0f;
    }
}

void poet_add(const float *a, const float *b, float *y, uint32_t count)
{
    for (uint32_t i = 0; i < count; ++i) {
        y[i] = a[i] + b[i];
    }
}

void poet_add_grad(const float *const *g, uint32_t ng, float *dy, uint32_t count)
{
    for (uint32_t i = 0; i < count; ++i) {
        dy[i] = grad_at(g, ng, i);
    }
}

/* The taps [lo, hi) of the window of output `out` that fall inside an input of `size`. */
static void window(uint32_t out, uint32_t stride, uint32_t pad, uint32_t k, uint32_t size, uint32_t *lo, uint32_t *hi)
{
    int32_t start = (int32_t)(out * stride) - (int32_t)pad;
    int32_t first = start < 0 ? -start : 0;
    int32_t last = (int32_t)size - start;
    if (last > (int32_t)k) {
        last = (int32_t)k;
    }
    if (last < first) {
        last = first;
    }
    *lo = (uint32_t)first;
    *hi = (uint32_t)last;
}

void poet_maxpool(const float *x, float *y, uint32_t *index, const poet_pool_shape *s)
{
    const uint32_t plane = s->h * s->w;
    uint32_t at = 0;
    for (uint32_t p = 0; p < s->planes; ++p) {
        const float *xp = x + p * plane;
        for (uint32_t oy = 0; oy < s->oh; ++oy) {
            uint32_t ky0, ky1;
            window(oy, s->stride, s->pad, s->k, s->h, &ky0, &ky1);
            int32_t iy0 = (int32_t)(oy * s->stride) - (int32_t)s->pad;
            for (uint32_t ox = 0; ox < s->ow; ++ox) {
                uint32_t kx0, kx1;
                window(ox, s->stride, s->pad, s->k, s->w, &kx0, &kx1);
                int32_t ix0 = (int32_t)(ox * s->stride) - (int32_t)s->pad;
                /* The first largest value wins, scanning rows then columns (PyTorch's choice). */
                uint32_t best = (uint32_t)(iy0 + (int32_t)ky0) * s->w + (uint32_t)(ix0 + (int32_t)kx0);
                for (uint32_t ky = ky0; ky < ky1; ++ky) {
                    for (uint32_t kx = kx0; kx < kx1; ++kx) {
                        uint32_t i = (uint32_t)(iy0 + (int32_t)ky) * s->w + (uint32_t)(ix0 + (int32_t)kx);
                        if (xp[i] > xp[best]) {
                            best = i;
                        }
                    }
                }
                y[at] = xp[best];
                index[2u * at] = best;
                index[2u * at + 1u] = 0u;
                ++at;
            }
        }
    }
}

int poet_maxpool_grad(const float *const *g, uint32_t ng, const uint32_t *index, float *dx, const poet_pool_shape *s)
{
    const uint32_t plane = s->h * s->w, pooled = s->oh * s->ow;
    memset(dx, 0, (size_t)s->planes * plane * sizeof(float));
    uint32_t at = 0;
    for (uint32_t p = 0; p < s->planes; ++p) {
        for (uint32_t i = 0; i < pooled; ++i, ++at) {
            uint32_t where = index[2u * at];
            if (index[2u * at + 1u] != 0u || where >= plane) {
                return 1;
            }
            dx[p * plane + where] += grad_at(g, ng, at);
        }
    }
    return 0;
}

/* One row's softmax terms: its largest logit and the sum of exp(logit - largest). */
static void softmax_terms(const float *row, uint32_t classes, float *largest, float *sum)
{
    float m = row[0];
    for (uint32_t c = 1; c < classes; ++c) {
        if (row[c] > m) {
            m = row[c];
        }
    }
    float total = 0.0f;
    for (uint32_t c = 0; c < classes; ++c) {
        total += expf(row[c] - m);
    }
    *largest = m;
    *sum = total;
}

int poet_loss(const float *logits, const int32_t *labels, float *loss, uint32_t rows, uint32_t classes)
{
    for (uint32_t r = 0; r < rows; ++r) {
        if (labels[r] < 0 || (uint32_t)labels[r] >= classes) {
            return 1;
        }
        const float *row = logits + r * classes;
        float m, sum;
        softmax_terms(row, classes, &m, &sum);
        loss[r] = logf(sum) + m - row[labels[r]];
    }
    return 0;
}

/* The gradient of the mean loss over the rows: (softmax - one-hot) / rows. */
int poet_loss_grad(const float *logits, const int32_t *labels, float *dlogits, uint32_t rows, uint32_t classes)
{
    const float scale = 1.0f / (float)rows;
    for (uint32_t r = 0; r < rows; ++r) {
        if (labels[r] < 0 || (uint32_t)labels[r] >= classes) {
            return 1;
        }
        const float *row = logits + r * classes;
        float m, sum;
        softmax_terms(row, classes, &m, &sum);
        for (uint32_t c = 0; c < classes; ++c) {
            float p = expf(row[c] - m) / sum;
            dlogits[r * classes + c] = (p - (c == (uint32_t)labels[r] ? 1.0f : 0.0f)) * scale;
        }
    }
    return 0;
}

void poet_avgpool(const float *x, float *y, uint32_t planes, uint32_t positions)
{
    const float scale = 1.0f / (float)positions;
    for (uint32_t p = 0; p < planes; ++p) {
        const float *xp = x + p * positions;
        float sum = 0.0f;
        for (uint32_t i = 0; i < positions; ++i) {
            sum += xp[i];
        }
        y[p] = sum * scale;
    }
}

void poet_avgpool_grad(const float *const *g, uint32_t ng, float *dx, uint32_t planes, uint32_t positions)
{
    const float scale = 1.0f / (float)positions;
    for (uint32_t p = 0; p < planes; ++p) {
        const float share = grad_at(g, ng, p) * scale;
        float *dxp = dx + p * positions;
        for (uint32_t i = 0; i < positions; ++i) {
            dxp[i] = share;
        }
    }
}

void poet_relu6(const float *x, float *y, uint32_t count)
{
    for (uint32_t i = 0; i < count; ++i) {
        y[i] = x[i] > 0.0f ? (x[i] < 6.0f ? x[i] : 6.0f) : 0.0f;
    }
}

void poet_relu6_grad(const float *const *g, uint32_t ng, const float *x, float *dx, uint32_t count)
{
    for (uint32_t i = 0; i < count; ++i) {
        dx[i] = x[i] > 0.0f && x[i] < 6.0f ? grad_at(g, ng, i) : 0.0f;
    }
}

/* The mean and inverse deviation of channel ch: its values in every sample, summed in order. */
static void bn_stats(const float *x, uint32_t n, uint32_t c, uint32_t positions, uint32_t ch, float *mean, float *invstd)
{
    const float count = (float)(n * positions);
    float sum = 0.0f;
    for (uint32_t s = 0; s < n; ++s) {
        const float *xs = x + (s * c + ch) * positions;
        for (uint32_t i = 0; i < positions; ++i) {
            sum += xs[i];
        }
    }
    const float mu = sum / count;
    float squares = 0.0f;
    for (uint32_t s = 0; s < n; ++s) {
        const float *xs = x + (s * c + ch) * positions;
        for (uint32_t i = 0; i < positions; ++i) {
            const float dev = xs[i] - mu;
            squares += dev * dev;
        }
    }
    *mean = mu;
    *invstd = 1.0f / sqrtf(squares / count + POET_BN_EPS);
}

void poet_batchnorm(const float *x, const float *gamma, const float *beta, float *y, uint32_t n, uint32_t c,
                    uint32_t positions)
{
    for (uint32_t ch = 0; ch < c; ++ch) {
        float mean, invstd;
        bn_stats(x, n, c, positions, ch, &mean, &invstd);
        const float scale = invstd * gamma[ch], shift = beta[ch];
        for (uint32_t s = 0; s < n; ++s) {
            const uint32_t at = (s * c + ch) * positions;
            for (uint32_t i = 0; i < positions; ++i) {
                y[at + i] = (x[at + i] - mean) * scale + shift;
            }
        }
    }
}

void poet_batchnorm_grad(const float *const *g, uint32_t ng, const float *x, const float *gamma, float *dgamma,
                         float *dbeta, float *dx, uint32_t n, uint32_t c, uint32_t positions)
{
    const float count = (float)(n * positions);
    for (uint32_t ch = 0; ch < c; ++ch) {
        float mean, invstd;
        bn_stats(x, n, c, positions, ch, &mean, &invstd);
        float sum_g = 0.0f, sum_gx = 0.0f; /* the gradient, and the gradient times the normalised x */
        for (uint32_t s = 0; s < n; ++s) {
            const uint32_t at = (s * c + ch) * positions;
            for (uint32_t i = 0; i < positions; ++i) {
                const float gv = grad_at(g, ng, at + i);
                sum_g += gv;
                sum_gx += gv * ((x[at + i] - mean) * invstd);
            }
        }
        dgamma[ch] = sum_gx;
        dbeta[ch] = sum_g;
        if (dx) {
            /* dx = gamma invstd / m (m g - sum g - xhat sum g xhat) */
            const float k = gamma[ch] * invstd / count;
            for (uint32_t s = 0; s < n; ++s) {
                const uint32_t at = (s * c + ch) * positions;
                for (uint32_t i = 0; i < positions; ++i) {
                    const float xhat = (x[at + i] - mean) * invstd;
                    dx[at + i] = k * (count * grad_at(g, ng, at + i) - sum_g - xhat * sum_gx);
                }
            }
        }
    }
}
