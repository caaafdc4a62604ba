/* memtally-config — prints the shim's option table as Markdown (with or
 * without --markdown), from the same X-macro the shim parses: README.md's
 * environment-variable table is this output, and test_config fails when
 * the two differ. */
#include "platform/config.h"
#include <string.h>
int main(int argc, char **argv);
int
main(int argc, char **argv) {
	if (argc > 2 || (argc == 2 && strcmp(argv[1], "--markdown")))
		return 2;
	mt_config_markdown(1);
	return 0;
}
