# kolo.torch (python/): KOLO_WITH_TORCH is AUTO (build it when a Python with torch is found,
# else say in one line what to install), ON (fail the configure step without it) or OFF.
# The Python is KOLO_TORCH_PYTHON, by default the venv tools/install-deps.sh --torch makes
# (.venv/torch in the source tree); in a pip build, the installing Python (cmake/KoloPip.cmake,
# which also fails the build when pip's isolation hides torch). Everything about torch is read
# from that interpreter (no find_package(Torch): its config drags in CUDA detection for a CPU
# build): include and library paths, the C++11 ABI flag, the version, and Python's headers and
# module suffix.
# Sets KOLO_HAVE_TORCH and, when ON, KOLO_TORCH_INCLUDE_DIRS, KOLO_TORCH_LIBRARY_DIR,
# KOLO_TORCH_CXX11_ABI, KOLO_TORCH_VERSION, KOLO_TORCH_PYTHON_INCLUDE, KOLO_TORCH_EXT_SUFFIX,
# KOLO_TORCH_PYTHON_VERSION.
set(KOLO_WITH_TORCH AUTO CACHE STRING "Build kolo.torch (python/): AUTO, ON or OFF")
set_property(CACHE KOLO_WITH_TORCH PROPERTY STRINGS AUTO ON OFF)
if(NOT KOLO_WITH_TORCH MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "KOLO_WITH_TORCH=${KOLO_WITH_TORCH}: use AUTO, ON or OFF")
endif()
set(KOLO_TORCH_PYTHON "${PROJECT_SOURCE_DIR}/.venv/torch/bin/python"
    CACHE FILEPATH "Python interpreter whose torch kolo.torch is built against")

set(KOLO_HAVE_TORCH OFF)
set(_kolo_torch_install_hint "run tools/install-deps.sh --torch, or pass -DKOLO_TORCH_PYTHON=<a python with torch>")
if(DEFINED SKBUILD)  # a pip build (cmake/KoloPip.cmake)
  string(CONCAT _kolo_torch_install_hint
         "pip install torch into the environment you install kolo into and build with "
         "pip install --no-build-isolation, or leave it out with HOROVOD_WITHOUT_PYTORCH=1")
endif()

function(_kolo_torch_probe result)
  if(NOT EXISTS "${KOLO_TORCH_PYTHON}")
    set(${result} "no Python at KOLO_TORCH_PYTHON=${KOLO_TORCH_PYTHON}" PARENT_SCOPE)
    return()
  endif()
  execute_process(
    COMMAND "${KOLO_TORCH_PYTHON}" -c [=[
import sysconfig, sys, torch, torch.utils.cpp_extension as ext
print("|".join(ext.include_paths()))
print(ext.library_paths()[0])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.__version__)
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print("%d.%d" % sys.version_info[:2])
]=]
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT status EQUAL 0)
    set(${result} "${KOLO_TORCH_PYTHON} cannot import torch" PARENT_SCOPE)
    return()
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  list(LENGTH lines count)
  if(NOT count EQUAL 7)
    set(${result} "unexpected answer from ${KOLO_TORCH_PYTHON}: ${out}" PARENT_SCOPE)
    return()
  endif()
  list(GET lines 0 includes)
  string(REPLACE "|" ";" includes "${includes}")  # line 0: the include paths, '|'-joined
  list(GET lines 1 libdir)
  list(GET lines 2 abi)
  list(GET lines 3 version)
  list(GET lines 4 pyinclude)
  list(GET lines 5 suffix)
  list(GET lines 6 pyversion)
  if(NOT EXISTS "${pyinclude}/Python.h")
    set(${result} "no Python.h in ${pyinclude} (install python3-dev)" PARENT_SCOPE)
    return()
  endif()
  # kolo's API passes std::string: the extension, libkolo and torch must agree on the ABI.
  # kolo is built with the compiler's default, which is the C++11 ABI for g++ >= 5.
  if(NOT abi EQUAL 1)
    set(${result} "torch ${version} was built without the C++11 ABI, which libkolo uses"
        PARENT_SCOPE)
    return()
  endif()
  set(KOLO_TORCH_INCLUDE_DIRS "${includes}" PARENT_SCOPE)
  set(KOLO_TORCH_LIBRARY_DIR "${libdir}" PARENT_SCOPE)
  set(KOLO_TORCH_CXX11_ABI "${abi}" PARENT_SCOPE)
  set(KOLO_TORCH_VERSION "${version}" PARENT_SCOPE)
  set(KOLO_TORCH_PYTHON_INCLUDE "${pyinclude}" PARENT_SCOPE)
  set(KOLO_TORCH_EXT_SUFFIX "${suffix}" PARENT_SCOPE)
  set(KOLO_TORCH_PYTHON_VERSION "${pyversion}" PARENT_SCOPE)
  set(${result} "" PARENT_SCOPE)
endfunction()

if(NOT KOLO_WITH_TORCH STREQUAL "OFF" AND NOT KOLO_SANITIZE STREQUAL "")
  # A sanitized libkolo.so needs the sanitizer runtime preloaded into Python: not supported.
  set(_kolo_torch_why "a KOLO_SANITIZE build cannot be loaded into an unsanitized Python")
  if(KOLO_WITH_TORCH STREQUAL "ON")
    message(FATAL_ERROR "KOLO_WITH_TORCH=ON: ${_kolo_torch_why}")
  endif()
  message(STATUS "kolo.torch not built: ${_kolo_torch_why}")
elseif(NOT KOLO_WITH_TORCH STREQUAL "OFF")
  _kolo_torch_probe(_kolo_torch_problem)
  if(NOT _kolo_torch_problem STREQUAL "")
    kolo_pip_isolation_problem("${KOLO_TORCH_PYTHON}" torch PYTORCH _kolo_torch_isolation)
  endif()
  if(_kolo_torch_problem STREQUAL "")
    set(KOLO_HAVE_TORCH ON)
    message(STATUS "kolo.torch: torch ${KOLO_TORCH_VERSION} from ${KOLO_TORCH_PYTHON}")
  elseif(_kolo_torch_isolation)  # AUTO too: the user has it, pip hid it
    message(FATAL_ERROR "kolo.torch: ${_kolo_torch_problem}: ${_kolo_torch_isolation}")
  elseif(KOLO_WITH_TORCH STREQUAL "ON")
    message(FATAL_ERROR "KOLO_WITH_TORCH=ON: ${_kolo_torch_problem}; ${_kolo_torch_install_hint}")
  else()
    message(STATUS "kolo.torch not built (${_kolo_torch_problem}): ${_kolo_torch_install_hint}")
  endif()
endif()
