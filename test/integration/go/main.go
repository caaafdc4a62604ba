// A cgo program for test_reserved: Go's runtime reserves its arenas with
// mmap(PROT_NONE) through libc (x_cgo_mmap) and leaves through
// exit_group; it allocates from Go and from C for about two seconds.
package main

/*
#include <stdlib.h>
*/
import "C"
import (
	"fmt"
	"time"
)

var keep [][]byte

func main() {
	for i := 0; i < 200; i++ {
		keep = append(keep, make([]byte, 64<<10))
		p := C.malloc(4096)
		_ = p
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("go done", len(keep))
}
