#include "cmd.h"
int cmd_leaks(struct opts *o) { (void)o; return 0; }
int cmd_diff(struct opts *o) { (void)o; return 0; }
int cmd_ranks(struct opts *o) { (void)o; return 0; }
