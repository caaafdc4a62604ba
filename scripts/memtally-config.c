/* memtally-config — prints the shim's option table as Markdown, from the
 * same X-macro the shim parses (README's table is pasted from this). */
#include "platform/config.h"
int main(void);
int
main(void) {
	mt_config_markdown(1);
	return 0;
}
