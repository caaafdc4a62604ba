/*
 * dl.c — the real dlsym and the interposed dlsym trampoline (dl.h).
 * Platform layer: calls nothing of the shim above it; the "cu" filter is
 * a pair of pointers a higher layer installs.
 */
#include "platform/glue.h"
#include "platform/dl.h"
#include <dlfcn.h>

/* Read by the trampoline (hidden: PC-relative, no GOT). */
MT_HIDDEN mt_dlsym_fn mt_dl_real;
MT_HIDDEN int (*mt_dl_want)(const char *);
MT_HIDDEN void *(*mt_dl_serve)(void *, const char *);

mt_dlsym_fn
mt_real_dlsym(void) {
	mt_dlsym_fn f = __atomic_load_n(&mt_dl_real, __ATOMIC_ACQUIRE);
	if (!f) {
		/* dlsym moved into libc.so.6 at 2.34 with a new version; older
		 * glibc has only the 2.2.5 one.  dlvsym is never interposed. */
		f = (mt_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!f)
			f = (mt_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
		__atomic_store_n(&mt_dl_real, f, __ATOMIC_RELEASE);
	}
	return f;
}

void *
mt_dlsym(void *handle, const char *name) {
	mt_dlsym_fn f = mt_real_dlsym();
	return f ? f(handle, name) : NULL;
}

static void (*on_close)(void);

void
mt_dl_on_close(void (*fn)(void)) {
	__atomic_store_n(&on_close, fn, __ATOMIC_RELEASE);
}

/* An object dlclose unloads can be replaced by another at the same
 * address: what a layer above keeps per code address (the stack walker's
 * rules) is told once the real dlclose has returned (before, the object
 * is still there).  dlclose resolves nothing from its caller's address,
 * so a C forwarder is exact. */
static MT_TLS int in_close; /* this thread is inside dlclose */

int
mt_dl_in_close(void) {
	return in_close;
}

MT_EXPORT int
dlclose(void *handle) {
	int (*real)(void *) = (int (*)(void *))mt_dlsym(RTLD_NEXT, "dlclose");
	if (!real)
		return -1;
	in_close++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* marked before it starts */
	int r = real(handle);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	in_close--;
	void (*fn)(void) = __atomic_load_n(&on_close, __ATOMIC_ACQUIRE);
	if (fn)
		fn(); /* errno stays dlclose's: fn sets none (mt_dl_on_close) */
	return r;
}

void
mt_dlsym_filter(int (*want)(const char *), void *(*serve)(void *, const char *)) {
	__atomic_store_n(&mt_dl_serve, serve, __ATOMIC_RELEASE);
	__atomic_store_n(&mt_dl_want, want, __ATOMIC_RELEASE);
}

/* The exported dlsym (x86-64 SysV: handle in %rdi, name in %rsi).
 * Entry: %rsp = 8 mod 16.  The two calls out (want, the real dlsym's
 * first lookup) save the arguments and keep the stack aligned; their CFI
 * lets an unwinder started inside them walk through.  Every other exit
 * is a jump with the caller's return address still on top. */
/* Keep handle and name across a call, the stack 16-byte aligned. */
#define SAVE_ARGS                                                              \
	"	pushq %rdi\n	.cfi_adjust_cfa_offset 8\n"                          \
	"	pushq %rsi\n	.cfi_adjust_cfa_offset 8\n"                          \
	"	subq $8, %rsp\n	.cfi_adjust_cfa_offset 8\n"
#define RESTORE_ARGS                                                           \
	"	addq $8, %rsp\n	.cfi_adjust_cfa_offset -8\n"                         \
	"	popq %rsi\n	.cfi_adjust_cfa_offset -8\n"                          \
	"	popq %rdi\n	.cfi_adjust_cfa_offset -8\n"

__asm__(
	".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	".p2align 4\n"
	"dlsym:\n"
	"	.cfi_startproc\n"
	"	cmpq $-1, %rdi\n"            /* RTLD_NEXT: never filtered */
	"	je 2f\n"
	"	cmpb $0x63, (%rsi)\n"        /* 'c' */
	"	jne 2f\n"
	"	cmpb $0x75, 1(%rsi)\n"       /* 'u' */
	"	jne 2f\n"
	"	movq mt_dl_want(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	je 2f\n"
	SAVE_ARGS
	"	movq %rsi, %rdi\n"
	"	call *%rax\n"                /* want(name) */
	RESTORE_ARGS
	"	testl %eax, %eax\n"
	"	je 2f\n"
	"	movq mt_dl_serve(%rip), %rax\n"
	"	jmp *%rax\n"                 /* serve(handle, name) */
	"2:	movq mt_dl_real(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	je 3f\n"
	"	jmp *%rax\n"                 /* the real dlsym, as if called directly */
	"3:\n"
	SAVE_ARGS
	"	call mt_real_dlsym\n"
	RESTORE_ARGS
	"	testq %rax, %rax\n"
	"	je 4f\n"
	"	jmp *%rax\n"
	"4:	ret\n"                       /* no dlsym at all: NULL */
	"	.cfi_endproc\n"
	".size dlsym, .-dlsym\n");
