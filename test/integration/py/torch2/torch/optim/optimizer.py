"""The optimizer step machinery of torch 2.0-2.5's torch/optim/optimizer.py,
as memtally's hook meets it, in a few lines: module-level dicts of global
step pre- and post-hooks and register_optimizer_step_{pre,post}_hook to
add to them; Optimizer.__init__ wraps its class's step once (the wrapped
function carries hooked = True); the wrapper runs the pre-hooks, the step,
_optimizer_step_code(), then the instance's and the global post-hooks as
hook(optimizer, args, kwargs), called directly from the wrapper."""
import functools

_global_optimizer_pre_hooks = {}
_global_optimizer_post_hooks = {}


def register_optimizer_step_pre_hook(hook):
    _global_optimizer_pre_hooks[len(_global_optimizer_pre_hooks)] = hook


def register_optimizer_step_post_hook(hook):
    _global_optimizer_post_hooks[len(_global_optimizer_post_hooks)] = hook


class Optimizer(object):
    def __init__(self, params, defaults):
        self.params = list(params)
        self.defaults = defaults
        self._optimizer_step_post_hooks = {}
        cls = type(self)
        if not getattr(cls.step, 'hooked', None):
            cls.step = Optimizer.profile_hook_step(cls.step)
            cls.step.hooked = True

    def _optimizer_step_code(self):
        pass

    @staticmethod
    def profile_hook_step(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            self = args[0]
            for pre in list(_global_optimizer_pre_hooks.values()):
                pre(self, args, kwargs)
            out = func(*args, **kwargs)
            self._optimizer_step_code()
            for post in list(self._optimizer_step_post_hooks.values()) + list(_global_optimizer_post_hooks.values()):
                post(self, args, kwargs)
            return out
        return wrapper

    def step(self, closure=None):
        raise NotImplementedError


class SGD(Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, {'lr': lr})
        self.updates = 0

    def step(self, closure=None):
        self.updates += 1
