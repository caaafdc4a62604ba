/* lib_next.so — preloaded after the shim, wraps puts() and finds the real
 * one with dlsym(RTLD_NEXT): the shim's dlsym must pass that through as a
 * tail call, or RTLD_NEXT resolves relative to the shim and this returns
 * itself (infinite recursion). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
int puts(const char *s) {
	static int (*next)(const char *);
	if (!next)
		next = (int (*)(const char *))dlsym(RTLD_NEXT, "puts");
	if (next == puts)
		return -99; /* resolved to ourselves: the bug */
	fputs("[next] ", stdout);
	return next(s);
}
