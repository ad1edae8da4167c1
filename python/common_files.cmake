# The files of the kolo package that every binding installs (python/CMakeLists.txt for
# kolo.torch, python/tensorflow/CMakeLists.txt for kolo.tensorflow): the package root, its
# py.typed marker (PEP 561: the hints of the installed package are read by type checkers),
# kolo.common, Horovod's framework-free names kolo.data and kolo.runner, and kolo.ray and
# kolo.spark (pure Python, for either binding: docs/ENGINES.md) with kolo._engine, what they
# share. Paths relative to python/.
set(KOLO_COMMON_PY_FILES
  kolo/__init__.py
  kolo/py.typed
  kolo/common/__init__.py
  kolo/common/basics.py
  kolo/common/elastic.py
  kolo/common/errors.py
  kolo/common/exceptions.py
  kolo/common/objects.py
  kolo/common/op_names.py
  kolo/common/process_sets.py
  kolo/data/__init__.py
  kolo/data/data_loader_base.py
  kolo/runner/__init__.py
  kolo/runner/task.py
  kolo/_engine/__init__.py
  kolo/_engine/elastic.py
  kolo/_engine/paths.py
  kolo/_engine/proxy.py
  kolo/_engine/ranks.py
  kolo/ray/__init__.py
  kolo/ray/elastic.py
  kolo/ray/runner.py
  kolo/ray/strategy.py
  kolo/ray/worker.py
  kolo/spark/__init__.py
  kolo/spark/elastic.py
  kolo/spark/runner.py
  kolo/spark/task.py
)
