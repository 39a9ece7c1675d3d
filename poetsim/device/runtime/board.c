/* board.c: the runtime on an emulated Cortex-M board (QEMU's MPS2 AN385/AN386).
 *
 * Start-up (vector table, .data and .bss, the FPU where there is one), the step's clock, the
 * host link and main. The memory map (link.ld): code in SSRAM1 at 0x00000000, the runtime's
 * state, its stack and the activation arena in SSRAM2/3 at 0x20000000, and external memory
 * (PSRAM, 16 MiB at 0x21000000) holding the image the emulator loads before reset, the weight
 * gradients and the emulated flash that activations page to.
 *
 * The clock is the board's CMSDK APB timer 0, counting down at the 25 MHz peripheral clock;
 * under QEMU's -icount every instruction advances virtual time by a fixed step, so its ticks
 * count instructions (poetsim/device/qemu.py converts them). Results go back to the host through
 * Arm semihosting: result.bin (poet_result) and grads.bin (the weight gradients), in the
 * emulator's working folder.
 */
#include <stdint.h>
#include <string.h>

#include "poet.h"

#define EXT_BASE 0x21000000u
#define EXT_BYTES 0x01000000u
#define TIMER0 ((volatile uint32_t *)0x40000000u) /* CTRL, VALUE, RELOAD */
#define CPACR (*(volatile uint32_t *)0xE000ED88u)
#define STACK_PAINT 0xC0FFEE11u

/* Arm semihosting operations. */
#define SYS_OPEN 0x01u
#define SYS_CLOSE 0x02u
#define SYS_WRITE 0x05u
#define SYS_EXIT 0x18u
#define OPEN_WB 5u
#define EXIT_OK 0x20026u    /* ADP_Stopped_ApplicationExit */
#define EXIT_ERROR 0x20023u /* ADP_Stopped_RunTimeErrorUnknown */

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_bottom[], __stack_top[];
extern uint8_t __arena_start[], __arena_end[];

void reset_handler(void);
void fault_handler(void);
int main(void);

static poet_result result;

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(uintptr_t)__stack_top,
    reset_handler,
    fault_handler, /* NMI */
    fault_handler, /* HardFault */
    fault_handler, /* MemManage */
    fault_handler, /* BusFault */
    fault_handler, /* UsageFault */
};

static uint32_t semihost(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static void finish(uint32_t reason)
{
    /* On 32-bit Arm SYS_EXIT takes the reason itself, not a block. */
    semihost(SYS_EXIT, (const void *)(uintptr_t)reason);
    for (;;) {
    }
}

/* Write `bytes` from `data` to the host file `name`; 0 on success. */
static int write_file(const char *name, const void *data, uint32_t bytes)
{
    uint32_t open_args[3] = {(uint32_t)(uintptr_t)name, OPEN_WB, (uint32_t)strlen(name)};
    uint32_t fd = semihost(SYS_OPEN, open_args);
    if (fd == UINT32_MAX) {
        return 1;
    }
    uint32_t write_args[3] = {fd, (uint32_t)(uintptr_t)data, bytes};
    uint32_t left = semihost(SYS_WRITE, write_args);
    semihost(SYS_CLOSE, &fd);
    return left != 0u;
}

uint32_t poet_clock(void)
{
    return ~TIMER0[1]; /* the timer counts down from 0xFFFFFFFF */
}

static uint32_t stack_used(void)
{
    const uint32_t *word = __stack_bottom;
    while (word < __stack_top && *word == STACK_PAINT) {
        ++word;
    }
    return (uint32_t)((uintptr_t)__stack_top - (uintptr_t)word);
}

void fault_handler(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    result.magic = POET_RESULT_MAGIC;
    result.version = POET_RESULT_VERSION;
    result.status = POET_E_FAULT;
    result.err_a = ipsr & 0x1FFu;
    write_file("result.bin", &result, sizeof(result));
    finish(EXIT_ERROR);
}

void reset_handler(void)
{
    for (uint32_t *src = __data_load, *dst = __data_start; dst < __data_end;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = __bss_start; dst < __bss_end;) {
        *dst++ = 0u;
    }
#if defined(__ARM_FP)
    CPACR |= 0xFu << 20; /* CP10 and CP11: the FPU */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    /* Paint the stack below the current frame, so that its deepest use can be read at the end. */
    uint32_t *here;
    __asm__ volatile("mov %0, sp" : "=r"(here));
    for (uint32_t *word = __stack_bottom; word < here - 16; ++word) {
        *word = STACK_PAINT;
    }
    TIMER0[0] = 0u;
    TIMER0[2] = 0xFFFFFFFFu;
    TIMER0[1] = 0xFFFFFFFFu;
    TIMER0[0] = 1u; /* enable, no interrupt */
    finish(main() == 0 ? EXIT_OK : EXIT_ERROR);
}

int main(void)
{
    poet_run((uint8_t *)(uintptr_t)EXT_BASE, EXT_BYTES, __arena_start, (uint32_t)(__arena_end - __arena_start), &result);
    result.stack_bytes = stack_used();
    result.static_bytes = (uint32_t)((uintptr_t)__bss_end - (uintptr_t)__data_start);
    int failed = write_file("result.bin", &result, sizeof(result));
    if (result.status == POET_OK) {
        const poet_image_header *h = (const poet_image_header *)(uintptr_t)EXT_BASE;
        failed |= write_file("grads.bin", (const void *)(uintptr_t)(EXT_BASE + h->region[POET_REGION_GRADS][0]),
                             h->region[POET_REGION_GRADS][1]);
    }
    return failed || result.status != POET_OK;
}
