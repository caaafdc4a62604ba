#!/usr/bin/env python3
"""make_fixtures.py DIR — the fixed inputs of the golden-output test, made
the same every time (no clock, no randomness): two ranks of a small Python
trainer whose native frames sit in a module that no longer exists (so
names do not depend on this machine's binaries), rank 0 leaking 64 KiB a
step at one Python line, rank 1 not; and a CUDA OOM dump of rank 0.
test_golden.py runs every text command on them and compares with the
*.txt beside this script (MEMTALLY_GOLDEN_UPDATE=1 rewrites those)."""
import json, os, sys

D = sys.argv[1]
os.makedirs(D, exist_ok=True)
MOD = {'path': '/gone/libtrain.so', 'base': '0x7f0000000000', 'start': '0x7f0000001000',
       'end': '0x7f0000100000', 'offset': '0x1000', 'build_id': 'ab' * 20}
FRAMES = [  # id, file, func, line
    (1, '/home/u/train.py', '<module>', 40),
    (2, '/home/u/train.py', 'step', 22),
    (3, '/home/u/model.py', 'Model.forward', 17),
    (4, '/usr/lib/python3/dist-packages/torch/nn/functional.py', 'relu', 1457),
    (5, '/home/u/data.py', 'load_batch', 9),
    (6, '/home/u/train.py', 'save_checkpoint', 30),
]
PYSTACKS = {1: [4, 3, 2, 1], 2: [5, 2, 1], 3: [6, 1], 4: [1]}
STACKS = {  # id: (pcs, pystack)
    10: (['0x7f0000002100', '0x7f0000003200'], 1),   # the leak (rank 0)
    11: (['0x7f0000002180', '0x7f0000003280'], 2),   # churn
    12: (['0x7f0000004000'], 3),                      # checkpoint mmap
    13: (['0x7f0000005000', '0x7f0000006000'], 4),   # import-time heap
    14: (['0x7f0000007000'], 0),                      # the device allocations
}
KIB, MIB = 1024, 1 << 20

def header(rank, pid):
    return {'type': 'header', 'version': 2, 'tool': 'memtally', 'tool_version': '0.1.0', 'pid': pid,
            'ppid': 1, 'rank': rank, 'local_rank': rank, 'world_size': 2, 'host': 'node1',
            'exe': '/usr/bin/python3.11', 'argv': ['python3', 'train.py'],
            'start_wall_ns': 1700000000000000000, 'start_mono_ns': 1000, 'sample_bytes': 0,
            'exact_above_bytes': 1 << 20, 'page_bytes': 4096, 'config': {}}

def site(stack, kind, live, count, allocs, peak):
    return {'stack': stack, 'kind': kind, 'live_bytes': live, 'live_count': count,
            'allocs': allocs, 'alloc_bytes': max(live, peak) + allocs * 100,
            'frees': allocs - count, 'peak_bytes': peak}

def snapshot(seq, step, sites, reason='every'):
    heap = sum(s['live_bytes'] for s in sites if s['kind'] == 'heap')
    mmap = sum(s['live_bytes'] for s in sites if s['kind'] == 'mmap')
    cuda = sum(s['live_bytes'] for s in sites if s['kind'] == 'cuda')
    snap = {'type': 'snapshot', 'seq': seq, 'reason': reason, 'elapsed_ms': 2000 + 1000 * step,
            'wall_ns': 1700000000000000000 + (2000 + 1000 * step) * 1000000,
            'marks': {'step': step},
            'proc': {'rss_bytes': 200 * MIB + heap + mmap, 'vms_bytes': 900 * MIB,
                     'pss_bytes': 190 * MIB + heap + mmap},
            'heap': {'live_bytes': heap, 'live_count': sum(s['live_count'] for s in sites if s['kind'] == 'heap'),
                     'allocs': 1000 + 50 * step, 'alloc_bytes': heap + 5 * MIB, 'frees': 900 + 40 * step,
                     'free_bytes': 5 * MIB, 'peak_bytes': heap},
            'mmap': {'live_bytes': mmap, 'live_count': 1 if mmap else 0, 'allocs': 1, 'alloc_bytes': 64 * MIB,
                     'frees': 0, 'free_bytes': 0, 'peak_bytes': 64 * MIB},
            'shim': {'memory_bytes': 6 * MIB, 'stacks': len(STACKS), 'dropped_stacks': 0, 'dropped_live': 0},
            'callsites_mode': 'full', 'callsites': sites}
    if cuda:
        snap['cuda'] = {'live_bytes': cuda, 'live_count': 2, 'allocs': 2, 'alloc_bytes': cuda,
                        'frees': 0, 'free_bytes': 0, 'peak_bytes': cuda}
        snap['devices'] = [{'device': 0, 'live_bytes': cuda, 'live_count': 2, 'peak_bytes': cuda,
                            'allocs': 2, 'frees': 0, 'ooms': 0, 'recovered': 0}]
    return snap

def records(rank, pid, leak):
    out = [header(rank, pid), {'type': 'maps', 'modules': [MOD]},
           {'type': 'python', 'version': '3.11.2', 'how': 'table'}]
    for i, f, fn, ln in FRAMES:
        out.append({'type': 'pyframe', 'id': i, 'file': f, 'func': fn, 'line': ln})
    for i, fr in PYSTACKS.items():
        out.append({'type': 'pystack', 'id': i, 'frames': fr, 'entry': [1] * len(fr)})
    for i, (pcs, py) in STACKS.items():
        out.append({'type': 'stack', 'id': i, 'pcs': pcs, 'py': py})
    for step in range(24):
        sites = [site(13, 'heap', 3 * MIB, 900, 900, 3 * MIB),
                 site(11, 'heap', (step % 3) * 200 * KIB, step % 3, 10 * step, 400 * KIB)]
        if leak:
            sites.append(site(10, 'heap', step * 64 * KIB, step, step, step * 64 * KIB))
        if step in (8, 9):  # a checkpoint mapping held for two steps
            sites.append(site(12, 'mmap', 64 * MIB, 1, 1, 64 * MIB))
        snap = snapshot(step, step, sites, reason='exit' if step == 23 else 'every')
        if rank == 1:  # phases and the workload (issue 56): a checkpoint at step 8
            snap['workload'] = {'step': step, 'batches': 1, 'shapes': [[4, 16 + step % 3]],
                                'batch_bytes': 512 + 32 * (step % 3), 'tokens': 64 + 4 * (step % 3)}
            if step == 8:
                snap['phase'] = 'checkpoint_save'
            if step >= 8:
                snap['mmap'].update(peak_phase='checkpoint_save', peak_step=8)
            if step == 10:
                snap['phases'] = {'checkpoint_save': {'count': 1, 'ms': 1500,
                                                      'spans': [[9800, 11300, 8]]}}
            elif step > 10:
                snap['phases'] = {'checkpoint_save': {'count': 1, 'ms': 1500}}
        out.append(snap)
    return out

def write(name, recs):
    with open(os.path.join(D, name), 'w') as f:
        for r in recs:
            f.write(json.dumps(r, separators=(',', ':')) + '\n')

write('memtally.node1.r0.p100.jsonl', records(0, 100, True))
write('memtally.node1.r1.p101.jsonl', records(1, 101, False))
# The OOM dump: rank 0 at step 20, two device blocks live, a third refused.
dump = [header(0, 100), {'type': 'maps', 'modules': [MOD]},
        {'type': 'python', 'version': '3.11.2', 'how': 'table'}]
dump += [r for r in records(0, 100, True) if r['type'] in ('pyframe', 'pystack', 'stack')]
dump.append({'type': 'oom', 'kind': 'cuda', 'api': 'cuMemAlloc_v2', 'requested_bytes': 2 << 30,
             'error': 'CUDA_ERROR_OUT_OF_MEMORY', 'sampled': False, 'device': 0,
             'driver_free_bytes': 1 << 30, 'driver_total_bytes': 80 << 30, 'elapsed_ms': 22000})
for k, a in enumerate((0x7e0000000000, 0x7e0040000000)):
    dump.append({'type': 'segment', 'kind': 'cuda', 'address': hex(a), 'size': 1 << 30, 'stack': 14,
                 'time_ms': 5000 + 1000 * k, 'device': 0, 'stream': 0})
for k, (op, a) in enumerate((('alloc', 0x7e0000000000), ('alloc', 0x7e0040000000),
                             ('alloc', 0x7e0080000000), ('free', 0x7e0080000000))):
    dump.append({'type': 'trace', 'op': op, 'kind': 'cuda', 'address': hex(a), 'size': 1 << 30,
                 'stack': 14, 'time_ms': 5000 + 1000 * k})
dump.append({'type': 'trace', 'op': 'oom', 'kind': 'cuda', 'address': '0x0', 'size': 2 << 30,
             'stack': 14, 'time_ms': 22000})
s = snapshot(0, 20, [site(14, 'cuda', 2 << 30, 2, 3, 3 << 30)], reason='oom')
dump.append(s)
write('memtally.node1.r0.p100.oom1.jsonl', dump)
