/* kernels.h: forward and backward operations in float32, no scratch memory.
 *
 * A backward kernel reads the gradient of its layer's output as the sum of its upstream
 * gradient tensors (`g`, `ng` of them, summed in order at each element), writes the gradient
 * of its input into `dx` (NULL when the input takes none) and the gradients of its weights
 * into `dw` (overwritten, not accumulated: a recomputed backward node writes the same values).
 * Loops run in one fixed order, so a step gives the same bits whatever the schedule.
 * Sizes are validated by program.c before any kernel runs.
 */
#ifndef POET_KERNELS_H
#define POET_KERNELS_H

#include <stdint.h>

/* The largest window side (program.c refuses larger ones). */
#define POET_MAX_KERNEL 16u

typedef struct {
    uint32_t n, c, h, w, o, oh, ow, k, stride, pad;
    uint32_t groups; /* c / groups inputs per output channel; groups = c is a depthwise convolution */
} poet_conv_shape;

typedef struct {
    uint32_t planes, h, w, oh, ow, k, stride, pad;
} poet_pool_shape;

void poet_linear(const float *x, const float *w, const float *b, float *y, uint32_t m, uint32_t k, uint32_t n);
void poet_linear_grad(const float *const *g, uint32_t ng, const float *x, const float *w, float *dw, float *db, float *dx,
                      uint32_t m, uint32_t k, uint32_t n);
void poet_conv(const float *x, const float *w, const float *b, float *y, const poet_conv_shape *s);
void poet_conv_grad(const float *const *g, uint32_t ng, const float *x, const float *w, float *dw, float *db, float *dx,
                    const poet_conv_shape *s);
void poet_relu(const float *x, float *y, uint32_t count);
void poet_relu_grad(const float *const *g, uint32_t ng, const float *y, float *dx, uint32_t count);
void poet_add(const float *a, const float *b, float *y, uint32_t count);
void poet_add_grad(const float *const *g, uint32_t ng, float *dy, uint32_t count);
/* Pooling indices are int64 as PyTorch keeps them, stored as (low, high) uint32 word pairs so that
 * no access needs 8-byte alignment. */
void poet_maxpool(const float *x, float *y, uint32_t *index, const poet_pool_shape *s);
/* 0, or 1 when a stored index lies outside its plane */
int poet_maxpool_grad(const float *const *g, uint32_t ng, const uint32_t *index, float *dx, const poet_pool_shape *s);
/* ReLU6, min(max(x, 0), 6); its backward reads the input x, as PyTorch's. */
void poet_relu6(const float *x, float *y, uint32_t count);
void poet_relu6_grad(const float *const *g, uint32_t ng, const float *x, float *dx, uint32_t count);
/* Batch normalisation in training mode over `n` samples of `c` channels of `positions` values:
 * each channel by the mean and biased variance of its n * positions values (eps POET_BN_EPS), then
 * scaled by gamma[c] and shifted by beta[c]. The backward reads x and computes the statistics
 * again (the same bits), so nothing but x is kept between the passes. */
#define POET_BN_EPS 1e-5f
void poet_batchnorm(const float *x, const float *gamma, const float *beta, float *y, uint32_t n, uint32_t c,
                    uint32_t positions);
void poet_batchnorm_grad(const float *const *g, uint32_t ng, const float *x, const float *gamma, float *dgamma,
                         float *dbeta, float *dx, uint32_t n, uint32_t c, uint32_t positions);
/* Global average pooling: each of `planes` planes of `positions` values to its mean. */
void poet_avgpool(const float *x, float *y, uint32_t planes, uint32_t positions);
void poet_avgpool_grad(const float *const *g, uint32_t ng, float *dx, uint32_t planes, uint32_t positions);
/* 0, or 1 when a label lies outside [0, classes) */
int poet_loss(const float *logits, const int32_t *labels, float *loss, uint32_t rows, uint32_t classes);
int poet_loss_grad(const float *logits, const int32_t *labels, float *dlogits, uint32_t rows, uint32_t classes);

#endif
