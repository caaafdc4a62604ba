#!/usr/bin/env bash
# bundle-libs.sh DIR — copy into DIR/lib every shared library that DIR's
# libmemtally.so and memtally load from outside glibc (glibc itself stays:
# the target machine's is newer, and a second one cannot be mixed in).
set -eu
dir=$1
glibc='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil)\.so'
for bin in "$dir/libmemtally.so" "$dir/memtally"; do
	ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
	if [[ $name =~ $glibc ]]; then continue; fi
	cp -L "$path" "$dir/lib/$name"
done
ls "$dir/lib"
