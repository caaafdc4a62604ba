"""Synthesize a snapshot-heavy memtally file for the reader benchmark:
N stacks, S snapshots each listing every call site (the worst case for the
reader: "full" snapshots, as with MEMTALLY_TOP)."""
import json, random, sys
out, nstacks, nsnaps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(1)
with open(out, 'w') as f:
    f.write(json.dumps({"type": "header", "version": 1, "tool": "memtally", "pid": 1, "ppid": 0,
                        "rank": 0, "host": "bench", "exe": "/bin/true", "argv": ["bench"],
                        "sample_bytes": 0}, separators=(',', ':')) + '\n')
    f.write(json.dumps({"type": "maps", "modules": [{"path": "/bin/true", "base": "0x400000",
                        "start": "0x400000", "end": "0x500000", "offset": "0x0"}]},
                       separators=(',', ':')) + '\n')
    for i in range(1, nstacks + 1):
        pcs = ['0x%x' % (0x400000 + rnd.randrange(0x100000)) for _ in range(12)]
        f.write('{"type":"stack","id":%d,"pcs":%s}\n' % (i, json.dumps(pcs, separators=(',', ':'))))
    live = [0] * (nstacks + 1)
    for s in range(nsnaps):
        sites = []
        for i in range(1, nstacks + 1):
            live[i] += rnd.randrange(-1000, 1100)
            sites.append('{"stack":%d,"kind":"heap","live_bytes":%d,"live_count":%d,"allocs":%d,'
                         '"alloc_bytes":%d,"frees":%d,"peak_bytes":%d}' %
                         (i, abs(live[i]), abs(live[i]) // 64, s * 100 + i, s * 6400 + i * 64,
                          s * 90, abs(live[i]) + 4096))
        f.write('{"type":"snapshot","seq":%d,"reason":"interval","wall_ns":%d,"mono_ns":%d,'
                '"elapsed_ms":%d,"proc":{"vms_bytes":1000000000,"rss_bytes":500000000},'
                '"heap":{"live_bytes":1,"live_count":1,"allocs":1,"alloc_bytes":1,"frees":0,'
                '"free_bytes":0,"peak_bytes":1},"callsites_mode":"full","callsites":[%s],'
                '"shim":{"memory_bytes":1,"stacks":%d,"dropped_stacks":0,"dropped_live":0}}\n'
                % (s, 1700000000000000000 + s * 10 ** 9, s * 10 ** 9, s * 1000, ','.join(sites), nstacks))
