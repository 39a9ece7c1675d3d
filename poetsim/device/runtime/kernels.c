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

/* The input rows a kernel row ky of output row oy reads, as [lo, hi) of ky for which the row is
 * inside the image: taps in the padding are skipped, not multiplied by zero. */
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

void poet_conv(const float *x, const float *w, const float *b, float *y, const poet_conv_shape *s)
{
    const uint32_t k = s->k, kk = s->k * s->k, plane = s->h * s->w;
    float *out = y;
    for (uint32_t n = 0; n < s->n; ++n) {
        const float *xn = x + n * s->c * plane;
        for (uint32_t o = 0; o < s->o; ++o) {
            const float *wo = w + o * s->c * kk;
            for (uint32_t oy = 0; oy < s->oh; ++oy) {
                uint32_t ky0, ky1;
                window(oy, s->stride, s->pad, k, s->h, &ky0, &ky1);
                int32_t iy0 = (int32_t)(oy * s->stride) - (int32_t)s->pad;
                for (uint32_t ox = 0; ox < s->ow; ++ox) {
                    uint32_t kx0, kx1;
                    window(ox, s->stride, s->pad, k, s->w, &kx0, &kx1);
                    int32_t ix0 = (int32_t)(ox * s->stride) - (int32_t)s->pad;
                    float acc = b ? b[o] : 0.0f;
                    for (uint32_t c = 0; c < s->c; ++c) {
                        const float *xc = xn + c * plane;
                        const float *wc = wo + c * kk;
                        for (uint32_t ky = ky0; ky < ky1; ++ky) {
                            const float *xrow = xc + (uint32_t)(iy0 + (int32_t)ky) * s->w;
                            const float *wrow = wc + ky * k;
                            for (uint32_t kx = kx0; kx < kx1; ++kx) {
                                acc += xrow[(uint32_t)(ix0 + (int32_t)kx)] * wrow[kx];
                            }
                        }
                    }
                    *out++ = acc;
                }
            }
        }
    }
}

void poet_conv_grad(const float *const *g, uint32_t ng, const float *x, const float *w, float *dw, float *db, float *dx,
                    const poet_conv_shape *s)
{
    const uint32_t k = s->k, kk = s->k * s->k, plane = s->h * s->w;
    memset(dw, 0, (size_t)s->o * s->c * kk * sizeof(float));
    if (db) {
        memset(db, 0, (size_t)s->o * sizeof(float));
    }
    if (dx) {
        memset(dx, 0, (size_t)s->n * s->c * plane * sizeof(float));
    }
    uint32_t at = 0;
    for (uint32_t n = 0; n < s->n; ++n) {
        const float *xn = x + n * s->c * plane;
        float *dxn = dx ? dx + n * s->c * plane : NULL;
        for (uint32_t o = 0; o < s->o; ++o) {
            const float *wo = w + o * s->c * kk;
            float *dwo = dw + o * s->c * kk;
            for (uint32_t oy = 0; oy < s->oh; ++oy) {
                uint32_t ky0, ky1;
                window(oy, s->stride, s->pad, k, s->h, &ky0, &ky1);
                int32_t iy0 = (int32_t)(oy * s->stride) - (int32_t)s->pad;
                for (uint32_t ox = 0; ox < s->ow; ++ox) {
                    uint32_t kx0, kx1;
                    window(ox, s->stride, s->pad, k, s->w, &kx0, &kx1);
                    int32_t ix0 = (int32_t)(ox * s->stride) - (int32_t)s->pad;
                    float gv = grad_at(g, ng, at++);
                    if (db) {
                        db[o] += gv;
                    }
                    for (uint32_t c = 0; c < s->c; ++c) {
                        for (uint32_t ky = ky0; ky < ky1; ++ky) {
                            uint32_t row = c * plane + (uint32_t)(iy0 + (int32_t)ky) * s->w;
                            const float *xrow = xn + row;
                            float *dwrow = dwo + c * kk + ky * k;
                            if (dxn) {
                                const float *wrow = wo + c * kk + ky * k;
                                float *dxrow = dxn + row;
                                for (uint32_t kx = kx0; kx < kx1; ++kx) {
                                    uint32_t ix = (uint32_t)(ix0 + (int32_t)kx);
                                    dwrow[kx] += gv * xrow[ix];
                                    dxrow[ix] += gv * wrow[kx];
                                }
                            } else {
                                for (uint32_t kx = kx0; kx < kx1; ++kx) {
                                    dwrow[kx] += gv * xrow[(uint32_t)(ix0 + (int32_t)kx)];
                                }
                            }
                        }
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
