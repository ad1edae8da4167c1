"""Fails, naming each one, when a public name of the given packages has no docstring.

    check_docstrings.py kolo.torch kolo.common
    check_docstrings.py kolo.tensorflow kolo.keras     (with the TensorFlow venv's python)

Imports each package and every module in it, and checks: the package and each module; every
function and class a module defines (its own public names, not what it imports); each such
class's public methods and properties (a docstring inherited from the method it overrides
counts, as inspect.getdoc and help() show it). A name is public when it does not start with
an underscore, or when the package exports it (DistributedOptimizer's classes are private but
their methods are what the user calls: EXTRA_CLASSES). Exit status 1 with one line per missing
docstring, 0 when there is none.
"""

import argparse
import importlib
import inspect
import pkgutil
import sys

# Private classes whose methods are a public API: DistributedOptimizer returns an instance of
# a subclass of the wrapped optimizer that has their methods.
EXTRA_CLASSES = {
    "kolo.torch.optimizer": ["_DistributedOptimizer"],
    "kolo.torch.adasum_optimizer": ["_DistributedAdasumOptimizer"],
    # kolo.tensorflow's DistributedOptimizer copies these classes' methods into a subclass of
    # the wrapped Keras optimizer; DistributedGradientTape those of _DistributedGradientTape.
    "kolo.tensorflow.optimizer": ["_DistributedMixin", "_Keras3Mixin", "_Keras2Mixin"],
    "kolo.tensorflow.gradient_tape": ["_DistributedGradientTape"],
}


def modules_of(package_name):
    """The package and every public module in it, imported."""
    package = importlib.import_module(package_name)
    modules = [package]
    for info in pkgutil.walk_packages(package.__path__, package_name + "."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue  # a private module (the native kolo.torch._C: typed by _C.pyi)
        modules.append(importlib.import_module(info.name))
    return modules


def own_doc(obj):
    return (getattr(obj, "__doc__", None) or "").strip()


def class_missing(cls, where):
    """The public methods and properties `cls` defines without a docstring."""
    missing = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if not (inspect.isfunction(member) or isinstance(member, property)):
            continue
        if not (inspect.getdoc(getattr(cls, name, member)) or "").strip():
            missing.append("%s.%s.%s" % (where, cls.__name__, name))
    return missing


def module_missing(module):
    missing = []
    if not own_doc(module):
        missing.append("%s (module docstring)" % module.__name__)
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj) or inspect.isclass(obj):
            if not own_doc(obj):
                missing.append("%s.%s" % (module.__name__, name))
        if inspect.isclass(obj):
            missing += class_missing(obj, module.__name__)
    for name in EXTRA_CLASSES.get(module.__name__, []):
        missing += class_missing(getattr(module, name), module.__name__)
    return missing


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+")
    args = parser.parse_args()
    missing, checked = [], 0
    for package in args.packages:
        for module in modules_of(package):
            checked += 1
            missing += module_missing(module)
    for name in missing:
        print("no docstring: %s" % name)
    print("check_docstrings: %d modules of %s, %d public names without a docstring"
          % (checked, ", ".join(args.packages), len(missing)))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
