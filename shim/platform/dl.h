/*
 * dl.h — the loader, at the bottom of the shim: the real dlsym and the
 * interposed one, and the interposed dlclose.
 *
 * The interposed dlsym is an assembly trampoline, correct by construction
 * at every optimisation level: every request it does not serve itself
 * leaves by a jump, never a call, so the real dlsym sees the program's
 * return address and resolves RTLD_NEXT (and RTLD_DEFAULT's scope) from
 * the caller, not from the shim.  (A C forwarder depends on the compiler
 * emitting a tail call: at -O0 it is a call, and a second preloaded
 * library's dlsym(RTLD_NEXT, "puts") then returned itself.)
 *
 * A layer above (cuda.c) may install a filter for names starting "cu":
 * want(name) says whether it serves the name, serve(handle, name) answers
 * it.  RTLD_NEXT requests are never filtered.
 * Rules: never calls malloc (dlvsym may, at first use, through the hooks'
 * bootstrap pool); may run before the constructor.
 */
#ifndef MT_DL_H
#define MT_DL_H

typedef void *(*mt_dlsym_fn)(void *handle, const char *name);

/* The real dlsym (glibc's, from dlvsym), found at first use; NULL if the
 * C library has none.  Never allocates after the first call. */
mt_dlsym_fn mt_real_dlsym(void);

/* The shim's own lookups: the real dlsym called from the shim (RTLD_NEXT
 * means "after the shim").  NULL where there is no real dlsym. */
void *mt_dlsym(void *handle, const char *name);

/* fn runs after every dlclose the program makes (the interposed one):
 * it must not allocate, take a lock or set errno. */
void mt_dl_on_close(void (*fn)(void));

/* Whether the calling thread is inside the program's dlclose (the
 * interposed one): it may hold the loader's lock half way through
 * unloading an object, its segments unmapped while its link map is still
 * listed.  A death there must not walk the link maps (signals.c,
 * header.c's staged maps).  Async-signal-safe: a thread-local read. */
int mt_dl_in_close(void);

/* Install the "cu" filter (cuda.c, from the constructor). */
void mt_dlsym_filter(int (*want)(const char *name),
		     void *(*serve)(void *handle, const char *name));

#endif
