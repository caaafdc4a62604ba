"""py_die.py SIG HOW — a Python process that dies by a signal (test_death).
SIG: TERM, INT, HUP, QUIT, ABRT (a name of the signal module without SIG).
HOW: self (os.kill itself), wait (print "ready", wait for the test's),
own (its own handler with signal.signal: prints, exits 7), default
(signal.SIG_DFL set, then self).  Prints what
the signal module reports of the disposition, so runs compare."""
import os, signal, sys, time

sig = getattr(signal, 'SIG' + sys.argv[1])
how = sys.argv[2]
keep = [bytearray(10000) for _ in range(64)]

def name(h):
    return {signal.SIG_DFL: 'SIG_DFL', signal.SIG_IGN: 'SIG_IGN', None: 'None',
            signal.default_int_handler: 'default_int_handler'}.get(h, 'a handler')

print('at start:', name(signal.getsignal(sig)), flush=True)
if how == 'own':
    def h(s, f):
        print('own handler:', s, flush=True)
        sys.exit(7)
    print('previous:', name(signal.signal(sig, h)), flush=True)
    print('now:', 'own' if signal.getsignal(sig) is h else 'other', flush=True)
if how == 'default':  # the default action put back: the signal kills it
    print('previous:', name(signal.signal(sig, signal.SIG_DFL)), flush=True)
if how == 'wait':
    print('ready', flush=True)
    while True:
        time.sleep(1)
os.kill(os.getpid(), sig)
time.sleep(30)
print('alive')
